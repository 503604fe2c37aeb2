package proxmox

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pve "github.com/luthermonson/go-proxmox"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/providers/proxmox/pvefake"
)

func request(name, uid string) contract.CreateRequest {
	return contract.CreateRequest{Name: name, UID: uid, Owner: testOwner, Placement: testPlacement, Port: 3128,
		CloudInit: []byte("#cloud-config\npackages: [tinyproxy]\n")}
}

// testOwner is the install and entry the tests' requests name (§8).
const testOwner = "c0ffee12-lab"

func testUID(n int) string { return fmt.Sprintf("0e9d6c1a-7f3b-4d2e-9a5c-%012d", n) }

// createRetrying calls Create until it returns anything but a transient
// error, as the operator's back-off does; the count bounds it, not a clock.
func createRetrying(t *testing.T, p *Provider, req contract.CreateRequest) contract.Instance {
	t.Helper()
	var err error
	for range 200 {
		var inst contract.Instance
		inst, err = p.Create(context.Background(), req)
		if err == nil {
			return inst
		}
		if contract.ClassOf(err) != contract.ClassTransient {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("Create(%s): %v", req.Name, err)
	return contract.Instance{}
}

// Concurrent Creates for different Proxies never share a VMID, whether
// their UIDs start them at different VMIDs or at the same one.
func TestConcurrentCreatesNeverShareAVMID(t *testing.T) {
	t.Run("many Proxies", func(t *testing.T) {
		f := startFake(t)
		p := f.provider(t)
		const n = 12
		got := make([]contract.Instance, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { got[i] = createRetrying(t, p, request(fmt.Sprintf("proxy-%d", i), testUID(i))) })
		}
		wg.Wait()
		assertDistinct(t, f, got)
	})

	t.Run("two Proxies whose UIDs pick the same first VMID", func(t *testing.T) {
		f := startFake(t)
		p := f.provider(t)
		rng := f.cfg.Regions[testRegion].VMIDs
		a, b := testUID(0), ""
		for i := 1; b == ""; i++ {
			if firstVMID(testUID(i), rng) == firstVMID(a, rng) {
				b = testUID(i)
			}
		}
		// Hold the clone tasks: the first clone keeps its VMID locked
		// while the second Create runs into it.
		release := f.s.HoldTasks("qmclone")
		type result struct {
			inst contract.Instance
			err  error
			req  contract.CreateRequest
		}
		results := make(chan result, 2)
		for i, uid := range []string{a, b} {
			go func() {
				req := request(fmt.Sprintf("same-start-%d", i), uid)
				inst, err := p.Create(context.Background(), req)
				results <- result{inst, err, req}
			}()
		}
		first := <-results
		if first.err == nil || contract.ClassOf(first.err) != contract.ClassTransient {
			t.Fatalf("with the other clone holding the VMID, Create = %+v, %v; want a transient error (busy)", first.inst, first.err)
		}
		release()
		second := <-results
		if second.err != nil {
			t.Fatalf("the Create holding the VMID: %v", second.err)
		}
		retried := createRetrying(t, p, first.req)
		assertDistinct(t, f, []contract.Instance{second.inst, retried})
	})
}

// assertDistinct checks every instance has its own VMID and the fake holds
// exactly one VM per instance, each marked with its own UID.
func assertDistinct(t *testing.T, f *fake, insts []contract.Instance) {
	t.Helper()
	seen := map[string]string{}
	for _, inst := range insts {
		if other, dup := seen[inst.ProviderID]; dup {
			t.Errorf("%s and %s share %s", other, inst.Name, inst.ProviderID)
		}
		seen[inst.ProviderID] = inst.Name
		vmid, _ := vmidOf(inst.ProviderID)
		conf, ok := f.s.Config(vmid)
		if !ok || conf["name"] != inst.Name || !strings.Contains(conf["tags"], tagUID+inst.UID) {
			t.Errorf("VM %d holds %v, want %s with UID %s", vmid, conf, inst.Name, inst.UID)
		}
	}
	vms := 0
	for _, r := range f.s.Inventory() {
		if strings.HasPrefix(r, "vm ") {
			vms++
		}
	}
	if vms != len(insts) {
		t.Errorf("the fake holds %d VMs, want %d: %v", vms, len(insts), f.s.Inventory())
	}
}

// A failed clone task is not success: go-proxmox's Task.Wait returns nil
// for it, the provider reads the exit status and classifies it.
func TestFailedCloneTask(t *testing.T) {
	f := startFake(t)
	p := f.provider(t)

	t.Run("Task.Wait returns nil for a failed task", func(t *testing.T) {
		api, _, _, err := p.regions[testRegion].client()
		if err != nil {
			t.Fatal(err)
		}
		f.s.FailNextTask("qmclone", "clone failed: demo")
		_, task, err := newVM(api, "pve1", templateVMID).Clone(context.Background(), &pve.VirtualMachineCloneOptions{NewID: 1099, Name: "demo"})
		if err != nil {
			t.Fatal(err)
		}
		f.s.WaitTasks()
		if err := task.Wait(context.Background(), time.Millisecond, time.Second); err != nil {
			t.Fatalf("Task.Wait: %v (the provider's reason to check the exit status is gone?)", err)
		}
		if !task.IsFailed || task.ExitStatus != "clone failed: demo" {
			t.Errorf("task after Wait: failed %v, exit status %q", task.IsFailed, task.ExitStatus)
		}
	})

	t.Run("storage full is ErrQuota", func(t *testing.T) {
		f.s.FailNextTask("qmclone", `clone failed: lvcreate 'pve/vm-1000-disk-0' error:   Volume group "pve" has insufficient free space (1023 extents): 2048 required.`)
		_, err := p.Create(context.Background(), request("full-pool", testUID(1)))
		if !errors.Is(err, contract.ErrQuota) || !strings.Contains(err.Error(), "insufficient free space") {
			t.Errorf("Create with a clone task failing for space = %v (class %s), want ErrQuota with PVE's text", err, contract.ClassOf(err))
		}
		if !errors.As(err, new(*TaskError)) {
			t.Errorf("the error does not reach the TaskError: %v", err)
		}
	})

	t.Run("other failures are transient, and Create then succeeds", func(t *testing.T) {
		f.s.FailNextTask("qmclone", "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout")
		req := request("lock-timeout", testUID(2))
		_, err := p.Create(context.Background(), req)
		if err == nil || contract.ClassOf(err) != contract.ClassTransient {
			t.Errorf("Create with a clone task failing on a lock = %v (class %s), want a transient error", err, contract.ClassOf(err))
		}
		createRetrying(t, p, req)
	})
}

// The seed is built with images/nocloud, uploaded to the ISO storage the
// zone names (not the first ISO-capable one), named after the VM, and gone
// after Delete, also when the VM went first.
func TestSeed(t *testing.T) {
	f := startFakeWith(t, func(o *pvefake.Options) {
		// "local" allows iso too and comes first: go-proxmox's own
		// CloudInit helper would pick it.
		o.Storages = append(o.Storages, pvefake.StorageSpec{Name: "isos", Type: "nfs", Content: []string{"iso"}, Shared: true})
	}, func(c *Config) {
		r := c.Regions[testRegion]
		r.Zones = map[string]Zone{"a": {Node: "pve1", ISOStorage: "isos"}}
		c.Regions[testRegion] = r
	})
	p := f.provider(t)
	ctx := context.Background()
	req := request("seeded", testUID(3))
	inst, err := p.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	vmid, _ := vmidOf(inst.ProviderID)
	volid := "isos:iso/" + seedFile(vmid, req.Name)
	conf, _ := f.s.Config(vmid)
	if conf["ide2"] != volid+",media=cdrom" {
		t.Errorf("cdrom %q, want %s on the configured ISO storage", conf["ide2"], volid)
	}
	iso, ok := f.s.Volume("pve1", volid)
	if !ok {
		t.Fatalf("no seed %s; inventory %v", volid, f.s.Inventory())
	}
	if ud, err := readISOFile(iso, "user-data"); err != nil || string(ud) != string(req.CloudInit) {
		t.Errorf("seed user-data %q, %v", ud, err)
	}
	if md, err := readISOFile(iso, "meta-data"); err != nil || !strings.Contains(string(md), "local-hostname: seeded") {
		t.Errorf("seed meta-data %q, %v", md, err)
	}
	if _, ok := f.s.Volume("pve1", "local:iso/"+seedFile(vmid, req.Name)); ok {
		t.Error("a seed landed on local, the first ISO-capable storage")
	}

	if err := p.Delete(ctx, inst.ProviderID); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.s.Volume("pve1", volid); ok {
		t.Errorf("the seed %s is still there after Delete: %v", volid, f.s.Inventory())
	}

	// The VM is destroyed by someone else first; Delete still finds the
	// seed by name.
	req = request("orphan", testUID(4))
	inst, err = p.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	vmid, _ = vmidOf(inst.ProviderID)
	finish, err := f.s.BeginDestroy(vmid)
	if err != nil {
		t.Fatal(err)
	}
	finish()
	f.s.WaitTasks()
	if err := p.Delete(ctx, inst.ProviderID); err != nil {
		t.Fatal(err)
	}
	if left := f.s.Inventory(); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

func startFakeWith(t *testing.T, opts func(*pvefake.Options), cfg func(*Config)) *fake {
	t.Helper()
	f := startFakeOpts(t, opts)
	cfg(&f.cfg)
	return f
}

// Rotating the token secret needs no restart: the provider reads the file
// again when it changes.
func TestCredentialRotation(t *testing.T) {
	f := startFake(t)
	p := f.provider(t)
	ctx := context.Background()
	if _, err := p.ListByTag(ctx, contract.LabelManaged, testOwner); err != nil {
		t.Fatal(err)
	}
	f.s.RotateSecret("rotated-secret-0001")
	if _, err := p.ListByTag(ctx, contract.LabelManaged, testOwner); !errors.Is(err, contract.ErrPermanent) {
		t.Fatalf("with the old secret ListByTag = %v, want a permanent 401", err)
	}
	writeFile(t, f.cfg.Regions[testRegion].TokenSecretFile, "rotated-secret-0001\n")
	if _, err := p.ListByTag(ctx, contract.LabelManaged, testOwner); err != nil {
		t.Errorf("after the file changed ListByTag = %v", err)
	}
}

// New validates and returns without a call (contract §7).
func TestNewNeverDials(t *testing.T) {
	f := startFake(t)
	before := f.s.Calls()
	f.provider(t)
	if after := f.s.Calls(); after != before {
		t.Errorf("New made %d calls", after-before)
	}
}

// A VMID outside every Proxy's marks is never returned by Get or deleted.
func TestForeignVMIsNotOurs(t *testing.T) {
	f := startFake(t)
	p := f.provider(t)
	vmid, err := f.s.CloneVM(templateVMID, "someone-elses")
	if err != nil {
		t.Fatal(err)
	}
	id := ids.Format(testRegion, strconv.Itoa(vmid))
	if _, err := p.Get(context.Background(), id); !errors.Is(err, contract.ErrNotFound) {
		t.Errorf("Get of an unmarked VM = %v, want ErrNotFound", err)
	}
	if err := p.Delete(context.Background(), id); err != nil {
		t.Errorf("Delete of an unmarked VM = %v, want nil", err)
	}
	if _, ok := f.s.Config(vmid); !ok {
		t.Error("Delete destroyed a VM without the marks")
	}
}

func TestStateTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    vmState
		ip   string
		want contract.State
	}{
		{"clone in progress", vmState{status: "stopped", lock: "clone"}, "", contract.StateProvisioning},
		{"create in progress", vmState{status: "stopped", lock: "create"}, "", contract.StateProvisioning},
		{"cloned, never started", vmState{status: "stopped"}, "", contract.StateProvisioning},
		{"running, agent not answering", vmState{status: "running", qmp: "running", started: true}, "", contract.StateProvisioning},
		{"running with an address", vmState{status: "running", qmp: "running", started: true}, "10.0.0.7", contract.StateRunning},
		{"running, backup lock", vmState{status: "running", qmp: "running", lock: "backup", started: true}, "10.0.0.7", contract.StateRunning},
		{"prelaunch", vmState{status: "running", qmp: "prelaunch", started: true}, "", contract.StateProvisioning},
		{"stopped after running", vmState{status: "stopped", started: true}, "", contract.StateStopped},
		{"paused", vmState{status: "running", qmp: "paused", started: true}, "", contract.StateStopped},
		{"internal-error", vmState{status: "running", qmp: "internal-error", started: true}, "", contract.StateStopped},
		{"hibernated", vmState{status: "stopped", lock: "suspended", started: true}, "", contract.StateStopped},
		{"being destroyed", vmState{lock: "destroyed"}, "", contract.StateTerminated},
		{"a QEMU state the table lacks", vmState{status: "running", qmp: "colo", started: true}, "", contract.StateStopped},
		{"a status PVE may add", vmState{status: "unknown", started: true}, "", contract.StateStopped},
		// /cluster/resources before pvestatd's first update of the VMID
		// (pve-manager API2Tools.pm extract_vm_stats).
		{"listed before pvestatd saw it, never started", vmState{status: "unknown"}, "", contract.StateProvisioning},
	} {
		if got := stateOf(tc.s, tc.ip); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestMarksRoundTrip(t *testing.T) {
	created := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	uid := testUID(7)
	tags := withTags("debian;template-tag", ourTags(testOwner, uid, created)...)
	m := readMarks(tags, "")
	if m.owner != testOwner || !m.tagged || m.uid != uid || !m.createdAt.Equal(created) || m.started {
		t.Errorf("from tags %q: %+v", tags, m)
	}
	if !slices.Contains(splitTags(tags), "template-tag") {
		t.Errorf("the template's tags were dropped: %q", tags)
	}
	m = readMarks("", description(testOwner, uid, created))
	if m.owner != testOwner || m.tagged || m.uid != uid || !m.createdAt.Equal(created) {
		t.Errorf("from the description: %+v", m)
	}
	// pve-common's pve-tag format.
	pveTag := regexp.MustCompile(`^(?i)[a-z0-9_][a-z0-9_\-+.]*$`)
	for _, tag := range append(ourTags(testOwner, uid, created), tagStarted) {
		if !pveTag.MatchString(tag) {
			t.Errorf("tag %q is not a PVE tag", tag)
		}
	}
}

// A repeat Create that finds no name in the cluster list (pvestatd lags
// behind a fresh clone) still resumes the Proxy's VM: the VMID walk reads
// the config of each nameless VM it passes.
func TestRepeatCreateWithLaggingList(t *testing.T) {
	f := startFake(t)
	req := request("lagging", testUID(5))
	first, err := f.provider(t).Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	f.s.HideNames(true)
	again, err := f.provider(t).Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if again.ProviderID != first.ProviderID {
		t.Errorf("repeat Create made %s, the first made %s", again.ProviderID, first.ProviderID)
	}
	assertDistinct(t, f, []contract.Instance{first})
}

// A VM in the mark window — cloned, its marks only in the description,
// because the Create was cut off before the tag write — is listed, so the
// garbage collector sees it even if the Proxy never retries.
func TestListByTagSeesTheMarkWindow(t *testing.T) {
	f := startFake(t)
	p := f.provider(t)
	ctx := context.Background()
	req := request("in-the-window", testUID(5))
	f.s.DropNextClone()
	if _, err := p.Create(ctx, req); err == nil || contract.ClassOf(err) != contract.ClassTransient {
		t.Fatalf("Create with the clone's answer lost = %v, want a transient error", err)
	}
	for _, filter := range [][2]string{{contract.LabelManaged, testOwner}, {contract.LabelUID, req.UID}} {
		got, err := p.ListByTag(ctx, filter[0], filter[1])
		if err != nil || len(got) != 1 {
			t.Fatalf("ListByTag(%s, %s) = %+v, %v; want the VM in the mark window", filter[0], filter[1], got, err)
		}
		if got[0].Name != req.Name || got[0].UID != req.UID || got[0].Owner != testOwner || got[0].CreatedAt.IsZero() || got[0].State != contract.StateProvisioning {
			t.Errorf("ListByTag(%s, %s) = %+v; want %s, UID %s, Owner %s, a CreatedAt, Provisioning", filter[0], filter[1], got[0], req.Name, req.UID, testOwner)
		}
		vmid, _ := vmidOf(got[0].ProviderID)
		if conf, _ := f.s.Config(vmid); conf["tags"] != "" {
			t.Fatalf("VM %d has tags %q: not in the mark window", vmid, conf["tags"])
		}
	}
	if got, err := p.ListByTag(ctx, contract.LabelUID, testUID(6)); err != nil || len(got) != 0 {
		t.Errorf("ListByTag for another UID = %+v, %v; want none", got, err)
	}
	for _, owner := range []string{otherOwner, contract.LegacyManagedValue} {
		if got, err := p.ListByTag(ctx, contract.LabelManaged, owner); err != nil || len(got) != 0 {
			t.Errorf("ListByTag(%s, %s) = %+v, %v; want none", contract.LabelManaged, owner, got, err)
		}
	}
}

// A Create retried while its clone task still runs makes no second VM:
// the clone's temporary config holds only `lock: clone`, so PVE names it
// "VM <vmid>" (qemu-server vmstatus), and the retry must see it as a clone
// in progress that may be its own, not as someone else's VM to pass by.
func TestRetryDuringCloneMakesOneVM(t *testing.T) {
	for _, tc := range []struct {
		fresh, pastDisks bool
	}{{false, false}, {true, false}, {false, true}, {true, true}} {
		fresh := tc.fresh
		name := map[bool]string{false: "same provider", true: "restarted provider"}[fresh] +
			map[bool]string{false: ", only the lock", true: ", disks copied"}[tc.pastDisks]
		t.Run(name, func(t *testing.T) {
			f := startFake(t)
			f.s.ClonesPastDisks(tc.pastDisks)
			p := f.provider(t)
			req := request("retried", testUID(7))
			release := f.s.HoldTasks("qmclone")
			defer release()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := p.Create(ctx, req)
				done <- err
			}()
			// Wait for the clone to be under way: a VM with only its lock.
			for !slices.ContainsFunc(f.s.Inventory(), func(s string) bool { return strings.HasPrefix(s, "vm ") }) {
				time.Sleep(time.Millisecond)
			}
			cancel()
			if err := <-done; err == nil {
				t.Fatal("the first Create succeeded with its clone task held")
			}
			retry := p
			if fresh {
				retry = f.provider(t)
			}
			_, err := retry.Create(context.Background(), req)
			if err == nil || contract.ClassOf(err) != contract.ClassTransient {
				t.Errorf("Create retried during the clone = %v (class %s), want a transient error (busy)", err, contract.ClassOf(err))
			}
			if n := countVMs(f); n != 1 {
				t.Fatalf("after the retry the fake holds %d VMs, want 1: %v", n, f.s.Inventory())
			}
			release()
			inst := createRetrying(t, retry, req)
			assertDistinct(t, f, []contract.Instance{inst})
		})
	}
}

func countVMs(f *fake) int {
	n := 0
	for _, r := range f.s.Inventory() {
		if strings.HasPrefix(r, "vm ") {
			n++
		}
	}
	return n
}

// A VM cloned and prepared but not started, listed before pvestatd's
// first update of its VMID (status "unknown", no name), is Provisioning in
// ListByTag, not Stopped.
func TestListByTagBeforePvestatd(t *testing.T) {
	f := startFake(t)
	req := request("fresh", testUID(8))
	id, err := control{f}.CreateUnstarted(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	f.s.HideNames(true)
	got, err := f.provider(t).ListByTag(context.Background(), contract.LabelUID, req.UID)
	if err != nil || len(got) != 1 || got[0].ProviderID != id || got[0].State != contract.StateProvisioning {
		t.Errorf("ListByTag = %+v, %v; want %s Provisioning", got, err, id)
	}
}
