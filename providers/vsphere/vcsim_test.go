package vsphere

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

// The test backend is govmomi's own simulator, vcsim, in process, reached
// through a TLS front the test controls, as a load balancer in front of a
// vCenter: it counts calls, can hold them (a hanging vCenter) and can lose
// one (answering 502 Bad Gateway, before vcsim sees the call or after
// vcsim did the work), or refuse one with a vSphere fault (FailCall). A
// 502 rather than a reset connection, as the CallCutter doc asks: SOAP
// calls are POSTs, which net/http does not retry, but an error status is
// a cut whatever the client. Everything the harness needs from the
// backend that the provider must not do — the guest reporting an
// address, faults, locks, unmarked VMs — the control below does through
// vcsim's own API, as an administrator of its own, or on vcsim's objects
// directly where vcsim has no API for it.

const (
	testUser     = "egress-operator"
	testPassword = "sentinel-password-8d2f41"
	// The control logs in as an administrator of its own, so that
	// rejecting the operator's credential leaves the control working.
	adminUser     = "vcsim-admin"
	adminPassword = "vcsim-admin-password"
	testFolder    = "/DC0/vm/egress-proxies"
	// templateName is the template every datacenter holds under the same
	// name, as the images catalogue expects (one name for all regions).
	templateName = "debian-12-proxy"
	// baseSnapshot is the snapshot DC0's template carries.
	baseSnapshot = "base"
	// testOwner is the Owner (install and provider entry) the package's
	// own tests create with; the harness sends its own.
	testOwner = "c0ffee12-vsphere"
)

// datacenters are vcsim's, one region each: two locations for ListByTag.
var datacenters = []string{"DC0", "DC1"}

// vcsim is one simulator behind the front.
type vcsim struct {
	model    *simulator.Model
	front    *httptest.Server
	calls    atomic.Int64
	answered atomic.Int64            // bytes of vcsim's answers through the front
	conns    atomic.Int64            // connections made to the front
	tap      atomic.Pointer[tapFunc] // when set, sees each call and its answer
	// tasksRunOn, when set, answers a call that starts a task at once, as
	// vCenter does, instead of once the task ended (awaitTask).
	tasksRunOn atomic.Bool
	gate       contracttest.Gate
	// listings counts the folder listings begun at the front; listGate
	// holds each after vcsim answered it (HoldListings).
	listings atomic.Int64
	listGate contracttest.Gate
	rejected atomic.Bool
	// rejectFrom is the call, counted by calls, from which the operator's
	// credential is refused (RejectCredentialsFrom); zero: none.
	rejectFrom atomic.Int64
	client     *vim25.Client // the control's own session, straight to vcsim
	cfg        Config

	// inventory is where Resources looks, resolved once: the config's
	// folders and datastores do not move.
	inventory []scope
	// refusals are the SDK paths, by class, that answer any call with
	// vSphere's fault of the class (refusalSDK).
	refusals map[contract.Class]string

	mu       sync.Mutex
	cut      cut  // the front call to cut, by number
	cutClone bool // FailAfterCreate: cut the next clone after it took effect
	// powerOnFault, when set, fails the power-on of the next clone that
	// asks for one: the VM is cloned, left off, and the task fails with
	// it (failPowerOn).
	powerOnFault types.BaseMethodFault
	// clones are the specs of the clones asked of the templates.
	clones []types.VirtualMachineCloneSpec
	// holds are the methods whose next call the front holds (holdNext).
	holds map[string]*heldCall
	held  []func() // stalls, locks and deletes held; Reset lets them go
}

// cut names one front call by its number in calls, and whether it is cut
// before vcsim sees it or after vcsim did the work. Zero cuts nothing.
// refusal, when set, answers the call with a fault instead of the 502:
// the path of refusalSDK that does (FailCall).
type cut struct {
	call    int64
	after   bool
	refusal string
}

func startVcsim(t testing.TB) *vcsim {
	t.Helper()
	model := simulator.VPX()
	model.Datacenter = len(datacenters)
	if err := model.Create(); err != nil {
		t.Fatal(err)
	}
	model.Service.Listen = &url.URL{User: url.UserPassword(adminUser, adminPassword)}
	v := &vcsim{model: model, refusals: map[contract.Class]string{}}
	for _, class := range []error{contract.ErrQuota, contract.ErrPermanent} {
		// Before the server starts: vcsim's service reads its paths
		// unlocked.
		v.refusals[contract.ClassOf(class)] = refusalSDK(model.Service, class)
	}
	sm := model.Map().SessionManager()
	sm.ValidLogin = func(req *types.Login) bool {
		if req.UserName == adminUser {
			return req.Password == adminPassword
		}
		return !v.rejected.Load() && req.UserName == testUser && req.Password == testPassword
	}
	server := model.Service.NewServer()
	t.Cleanup(func() { server.Close(); model.Remove() })

	backend, _ := url.Parse(server.URL.String())
	backend.User = nil
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(&url.URL{Scheme: backend.Scheme, Host: backend.Host}) },
		// Calls the test cancels on purpose are not news.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	v.front = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := v.calls.Add(1)
		if from := v.rejectFrom.Load(); from != 0 && n >= from && v.rejectFrom.CompareAndSwap(from, 0) {
			v.rejected.Store(true)
			control{v}.endSessions(context.WithoutCancel(r.Context()))
		}
		if v.gate.Pass(r.Context()) != nil {
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if v.holdHere(r.Context(), body) != nil {
			return
		}
		body, powerOnFault := v.takePowerOnFault(body)
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		how, cutHere := v.takeCut(n, body)
		switch {
		case cutHere && how.refusal != "":
			// Refused: vcsim's own service answers the fault, from the
			// class's path, where the call touches none of its objects.
			r.URL.Path = how.refusal
			v.model.Service.ServeSDK(w, r)
			return
		case cutHere && !how.after:
			// Lost on the way: the load balancer in front of vCenter
			// answers for the call vcsim never sees.
			http.Error(w, "upstream connection reset", http.StatusBadGateway)
			return
		}
		listing := isListing(body)
		if listing {
			v.listings.Add(1)
		}
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, r)
		if listing && v.listGate.Pass(r.Context()) != nil {
			return
		}
		v.answered.Add(int64(rec.Body.Len()))
		if tap := v.tap.Load(); tap != nil {
			(*tap)(r, body, rec.Body.Bytes())
		}
		if !v.tasksRunOn.Load() {
			v.awaitTask(r.Context(), rec.Body.Bytes())
		}
		if powerOnFault != nil {
			v.failTask(rec.Body.Bytes(), powerOnFault)
		}
		if cutHere {
			// vcsim did the work; its answer is lost on the way back.
			http.Error(w, "upstream connection reset", http.StatusBadGateway)
			return
		}
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	v.front.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			v.conns.Add(1)
		}
	}
	v.front.StartTLS()
	t.Cleanup(v.front.Close)

	ctx := context.Background()
	c, err := vim25.NewClient(ctx, soapClient(server.URL))
	if err != nil {
		t.Fatal(err)
	}
	if err := loginClient(ctx, c, server.URL); err != nil {
		t.Fatal(err)
	}
	v.client = c
	v.prepare(t)
	v.checkTemplates(t)
	v.cfg = v.config(t)
	v.inventory = v.inventoryScope(t)
	return v
}

// takeCut reports whether front call n, whose body is body, is to be cut,
// and how.
func (v *vcsim) takeCut(n int64, body []byte) (cut, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.cut.call == n:
		c := v.cut
		v.cut = cut{}
		return c, true
	case v.cutClone && bytes.Contains(body, []byte("CloneVM_Task")):
		v.cutClone = false
		return cut{call: n, after: true}, true
	}
	return cut{}, false
}

// refusalSDK adds to vcsim's service an SDK path that answers every call
// with vSphere's fault of class for it, and returns the path: a registry
// of its own, empty but for a handler that refuses each method, so that
// vcsim's own encoder writes the answer as vCenter does (500, a
// soapenv:Fault whose detail holds the fault) and none of vcsim's objects
// sees the call. The session is vcsim's, as vCenter checks privileges on
// the caller's session.
func refusalSDK(svc *simulator.Service, class error) string {
	r := simulator.NewRegistry()
	r.Path = "/sdk/refuse/" + strings.ToLower(string(contract.ClassOf(class)))
	r.Handler = func(_ *simulator.Context, m *simulator.Method) (mo.Reference, types.BaseMethodFault) {
		return nil, callFault(class, m)
	}
	svc.RegisterSDK(r)
	return r.Path
}

// taskRef finds the task a *_Task answer returns.
var taskRef = regexp.MustCompile(`<returnval type="Task">([^<]+)</returnval>`)

// awaitTask waits, when answer returns a task, until the task has ended.
// vcsim runs a task in the background; answering only once it ended
// makes every call the provider makes to wait for it (and so the number
// of calls a Create or a Delete makes, which CutCall counts on) the same
// from one run to the next, and means a call cut after it took effect
// has done all it set going.
func (v *vcsim) awaitTask(ctx context.Context, answer []byte) {
	m := taskRef.FindSubmatch(answer)
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	task := object.NewTask(v.client, types.ManagedObjectReference{Type: "Task", Value: string(m[1])})
	_ = task.Wait(ctx) // the task's own fault is the provider's to read
}

// prepare makes the template and the operator's folder in every
// datacenter: the first VM of each datacenter's cluster, powered off,
// renamed to templateName and marked as a template.
func (v *vcsim) prepare(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	for _, name := range datacenters {
		f := find.NewFinder(v.client, true)
		dc, err := f.Datacenter(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		f.SetDatacenter(dc)
		vm, err := f.VirtualMachine(ctx, name+"_C0_RP0_VM0")
		if err != nil {
			t.Fatal(err)
		}
		if task, err := vm.PowerOff(ctx); err != nil || task.Wait(ctx) != nil {
			t.Fatalf("power off the template: %v", err)
		}
		if task, err := vm.Rename(ctx, templateName); err != nil || task.Wait(ctx) != nil {
			t.Fatalf("rename the template: %v", err)
		}
		if name == datacenters[0] {
			// A snapshot for linked clones (clone_options_test.go);
			// DC1's template has none.
			if task, err := vm.CreateSnapshot(ctx, baseSnapshot, "", false, false); err != nil || task.Wait(ctx) != nil {
				t.Fatalf("snapshot the template: %v", err)
			}
		}
		if err := vm.MarkAsTemplate(ctx); err != nil {
			t.Fatal(err)
		}
		folders, err := dc.Folders(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := folders.VmFolder.CreateFolder(ctx, "egress-proxies"); err != nil {
			t.Fatal(err)
		}
	}
}

// config writes the credential files and the front's CA and returns the
// provider's config: one region per datacenter.
func (v *vcsim) config(t testing.TB) Config {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: v.front.Certificate().Raw})
	regions := map[string]Region{}
	for i, dc := range datacenters {
		regions[fmt.Sprintf("dc%d", i)] = Region{Datacenter: dc, Folder: "/" + dc + "/vm/egress-proxies", Zones: map[string]Zone{
			"c0": {ResourcePool: "/" + dc + "/host/" + dc + "_C0/Resources", Datastore: "LocalDS_0", Network: dc + "_DVPG0"},
		}}
	}
	return Config{
		Server:       v.front.URL + "/sdk",
		UsernameFile: write("username", []byte(testUser+"\n")),
		PasswordFile: write("password", []byte(testPassword+"\n")),
		CAFile:       write("ca.pem", ca),
		Regions:      regions,
		MachineTypes: map[string]MachineType{"small": {CPUs: 1, MemoryMiB: 512}},
		Images:       map[string]string{"debian-12": templateName},
		CallTimeout:  contract.Duration{Duration: 1e9},
		// vcsim's tasks take milliseconds. The bound also sets how long a
		// Delete's mark reads Terminated (deleting.go), which a Delete cut
		// off in DeleteResumesAfterFailure leaves for the harness to wait
		// out before it resumes.
		TaskTimeout: contract.Duration{Duration: 4 * time.Second},
	}
}

func (v *vcsim) provider(t testing.TB) *Provider {
	t.Helper()
	p, err := New(v.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// hold records what Reset must let go, and returns it run at most once.
func (v *vcsim) hold(release func()) func() {
	var once sync.Once
	f := func() { once.Do(release) }
	v.mu.Lock()
	v.held = append(v.held, f)
	v.mu.Unlock()
	return f
}

// simContext is a simulator context for changes the control makes on
// vcsim's objects directly.
func (v *vcsim) simContext() *simulator.Context {
	return &simulator.Context{Context: context.Background(), Map: v.model.Map()}
}

// holdTask puts a task on the VM, running, as another client's task on
// it would be (it shows in the VM's recentTask), and leaves it running
// until the returned function completes it.
func (v *vcsim) holdTask(vm types.ManagedObjectReference, name string) (*simulator.Task, func()) {
	task := simulator.CreateTask(vm, name, nil)
	now := time.Now()
	task.Info.State = types.TaskInfoStateRunning
	task.Info.StartTime = &now
	v.model.Map().Put(task)
	return task, func() {
		v.model.Map().AtomicUpdate(v.simContext(), task, []types.PropertyChange{
			{Name: "info.state", Val: types.TaskInfoStateSuccess},
			{Name: "info.completeTime", Val: time.Now()},
		})
	}
}

// busy makes every method called on the VM named name fail with vSphere's
// TaskInProgress for task, as vCenter refuses a second operation on a VM
// while a task holds it, until the returned function is called. Reads
// through the PropertyCollector are not calls on the VM and go on.
func (v *vcsim) busy(name string, task types.ManagedObjectReference) (free func()) {
	var held atomic.Bool
	held.Store(true)
	v.model.Service.AddFaultRule(&simulator.FaultInjectionRule{
		MethodName:              "*",
		ObjectType:              "VirtualMachine",
		ObjectName:              name,
		InclusionPropertyFilter: func(mo.Reference) bool { return held.Load() },
		FaultType:               simulator.FaultTypeCustom,
		Fault:                   &types.TaskInProgress{Task: task},
		Message:                 "Another task is already in progress.",
		Probability:             1,
		Enabled:                 true,
	})
	return func() { held.Store(false) }
}

// control is the harness's backend control over the simulator.
type control struct{ v *vcsim }

var (
	_ contracttest.GuestReporter          = control{}
	_ contracttest.StateInjector          = control{}
	_ contracttest.PowerOffer             = control{}
	_ contracttest.ListingHolder          = control{}
	_ contracttest.UnstartedCreator       = control{}
	_ contracttest.Locker                 = control{}
	_ contracttest.DeleteStarter          = control{}
	_ contracttest.UnmarkedCreator        = control{}
	_ contracttest.UIDMarkedCreator       = control{}
	_ contracttest.Staller                = control{}
	_ contracttest.FaultInjector          = control{}
	_ contracttest.CredentialRejecter     = control{}
	_ contracttest.CredentialRejecterFrom = control{}
	_ contracttest.UserDataReader         = control{}
	_ contracttest.CallCounter            = control{}
	_ contracttest.CallCutter             = control{}
	_ contracttest.CallFailer             = control{}
	_ contracttest.Resetter               = control{}
	_ contracttest.Inventory              = control{}
	_ contracttest.LegacyCreator          = control{}
)

// vm finds a VM of the operator's folder by providerID.
func (c control) vm(ctx context.Context, providerID string) (*object.VirtualMachine, error) {
	regionName, name, err := ids.Parse(providerID)
	if err != nil {
		return nil, err
	}
	region, ok := c.v.cfg.Regions[regionName]
	if !ok {
		return nil, fmt.Errorf("control: no region %q", regionName)
	}
	return find.NewFinder(c.v.client, true).VirtualMachine(ctx, region.Folder+"/"+name)
}

func (c control) reconfigure(ctx context.Context, providerID string, kv ...string) error {
	vm, err := c.vm(ctx, providerID)
	if err != nil {
		return err
	}
	var opts []types.BaseOptionValue
	for i := 0; i < len(kv); i += 2 {
		opts = append(opts, &types.OptionValue{Key: kv[i], Value: kv[i+1]})
	}
	task, err := vm.Reconfigure(ctx, types.VirtualMachineConfigSpec{ExtraConfig: opts})
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}

// ReportIP plays VMware Tools reporting the guest's address, through
// vcsim's SET.guest.* extraConfig; only this test control writes SET.*.
func (c control) ReportIP(ctx context.Context, providerID, ip string) error {
	return c.reconfigure(ctx, providerID, "SET.guest.ipAddress", ip)
}

// PowerOff powers the VM off through vSphere's API (PowerOffVM_Task), as
// a person in the vSphere Client would.
func (c control) PowerOff(ctx context.Context, providerID string) error {
	vm, err := c.vm(ctx, providerID)
	if err != nil {
		return err
	}
	task, err := vm.PowerOff(ctx)
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}

// SetUnknownState sets the VM's power state, on vcsim's object, to a
// value vSphere 8's enum does not have, as a later vSphere could add one.
func (c control) SetUnknownState(ctx context.Context, providerID string) error {
	vm, err := c.vm(ctx, providerID)
	if err != nil {
		return err
	}
	obj := c.v.model.Map().Get(vm.Reference())
	if obj == nil {
		return fmt.Errorf("control: vcsim has no %s", vm.Reference())
	}
	state := types.VirtualMachinePowerState("hibernating")
	c.v.model.Map().AtomicUpdate(c.v.simContext(), obj, []types.PropertyChange{
		{Name: "runtime.powerState", Val: state},
		{Name: "summary.runtime.powerState", Val: state},
	})
	return nil
}

// CreateUnstarted leaves the VM as an earlier clone powered off without
// markStarted: Create's clone, then powered off and the mark removed.
func (c control) CreateUnstarted(ctx context.Context, req contract.CreateRequest) (string, error) {
	p, err := New(c.v.cfg)
	if err != nil {
		return "", err
	}
	pl, err := p.plan(req)
	if err != nil {
		return "", err
	}
	ref, err := p.clone(ctx, pl, req)
	if err != nil {
		return "", err
	}
	vm := object.NewVirtualMachine(c.v.client, ref)
	task, err := vm.PowerOff(ctx)
	if err != nil {
		return "", err
	}
	if err := task.Wait(ctx); err != nil {
		return "", err
	}
	id := ids.Format(pl.regionName, req.Name)
	return id, c.reconfigure(ctx, id, markStarted, "")
}

// CreateLegacy makes the VM as a release before contract v0.3.0 left it:
// Create's clone, then egressproxies.managed rewritten to "true" by the
// control, as an administrator of its own.
func (c control) CreateLegacy(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
	p, err := New(c.v.cfg)
	if err != nil {
		return contract.Instance{}, err
	}
	inst, err := p.Create(ctx, req)
	if err != nil {
		return contract.Instance{}, err
	}
	inst.Owner = contract.LegacyManagedValue
	return inst, c.reconfigure(ctx, inst.ProviderID, markManaged, contract.LegacyManagedValue)
}

// Lock holds the VM as another client's reconfigure task would: the task
// runs on it, and every operation on the VM answers TaskInProgress.
func (c control) Lock(ctx context.Context, providerID string) (func(), error) {
	vm, err := c.vm(ctx, providerID)
	if err != nil {
		return nil, err
	}
	task, complete := c.v.holdTask(vm.Reference(), "reconfigVm")
	free := c.v.busy(vm.Name(), task.Self)
	return c.v.hold(func() { free(); complete() }), nil
}

// BeginDelete starts the VM's deletion as the operator does: a Delete
// of a provider of its own (another replica's, or one cut off while it
// waited), held at its Destroy_Task before vcsim sees it, as vcsim's
// method delay on Destroy_Task would hold it, until finish lets it go and
// waits for it. Only that call is held: another Delete's destroy passes.
// A destroy another client started is TestGetDuringAnotherClientsDestroy's.
func (c control) BeginDelete(ctx context.Context, providerID string) (func(), error) {
	p, err := New(c.v.cfg)
	if err != nil {
		return nil, err
	}
	arrived, release := c.v.holdNext("Destroy_Task")
	done := make(chan error, 1)
	go func() { done <- p.Delete(context.WithoutCancel(ctx), providerID) }()
	select {
	case <-arrived:
	case err := <-done:
		release()
		return nil, fmt.Errorf("control: the Delete ended before its destroy: %w", err)
	}
	return c.v.hold(func() {
		release()
		if err := <-done; err != nil {
			log.Printf("control: the held Delete of %s: %v", providerID, err)
		}
	}), nil
}

// beginForeignDelete starts the VM's deletion as another client would:
// powers it off, then holds a destroy task running on it (every other
// operation on the VM answers TaskInProgress) until finish destroys it.
func (c control) beginForeignDelete(ctx context.Context, providerID string) (func(), error) {
	vm, err := c.vm(ctx, providerID)
	if err != nil {
		return nil, err
	}
	if err := powerOff(ctx, vm); err != nil {
		return nil, err
	}
	task, complete := c.v.holdTask(vm.Reference(), "destroy")
	free := c.v.busy(vm.Name(), task.Self)
	return c.v.hold(func() {
		free()
		if err := destroy(context.WithoutCancel(ctx), vm); err != nil {
			log.Printf("control: finish the delete of %s: %v", providerID, err)
		}
		complete()
	}), nil
}

func powerOff(ctx context.Context, vm *object.VirtualMachine) error {
	task, err := vm.PowerOff(ctx)
	if err != nil {
		return err
	}
	if err := task.Wait(ctx); err != nil && !isAlreadyOff(err) {
		return err
	}
	return nil
}

func destroy(ctx context.Context, vm *object.VirtualMachine) error {
	task, err := vm.Destroy(ctx)
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}

// CreateUnmarked clones the template into the placement's region without
// marks, as a person would.
func (c control) CreateUnmarked(ctx context.Context, name string, pl contract.Placement) (string, error) {
	return c.cloneForeign(ctx, name, pl, nil)
}

// CreateUIDMarked clones the template with the UID's extraConfig key and
// not the managed one, as a copy of the operator's VM with that key
// removed.
func (c control) CreateUIDMarked(ctx context.Context, name string, pl contract.Placement, uid string) (string, error) {
	return c.cloneForeign(ctx, name, pl, &types.VirtualMachineConfigSpec{ExtraConfig: []types.BaseOptionValue{&types.OptionValue{Key: markUID, Value: uid}}})
}

// cloneForeign clones the template into the placement's region, with
// config's changes if any, as a person would.
func (c control) cloneForeign(ctx context.Context, name string, pl contract.Placement, config *types.VirtualMachineConfigSpec) (string, error) {
	region, ok := c.v.cfg.Regions[pl.Region]
	if !ok {
		return "", fmt.Errorf("control: no region %q", pl.Region)
	}
	zone, err := contract.LookupZone(region.Zones, pl.Zone)
	if err != nil {
		return "", err
	}
	f := find.NewFinder(c.v.client, true)
	tmpl, err := f.VirtualMachine(ctx, "/"+region.Datacenter+"/vm/"+templateName)
	if err != nil {
		return "", err
	}
	folder, err := f.Folder(ctx, region.Folder)
	if err != nil {
		return "", err
	}
	pool, err := f.ResourcePool(ctx, zone.ResourcePool)
	if err != nil {
		return "", err
	}
	ref := pool.Reference()
	task, err := tmpl.Clone(ctx, folder, name, types.VirtualMachineCloneSpec{Location: types.VirtualMachineRelocateSpec{Pool: &ref}, Config: config})
	if err != nil {
		return "", err
	}
	return ids.Format(pl.Region, name), task.Wait(ctx)
}

// DeleteUnmarked destroys a VM CreateUnmarked or CreateUIDMarked made; one carrying the
// operator's mark it refuses.
func (c control) DeleteUnmarked(ctx context.Context, providerID string) error {
	vm, err := c.vm(ctx, providerID)
	if isNotFound(err) {
		return contract.NotFound(err)
	}
	if err != nil {
		return err
	}
	var props mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"config.extraConfig"}, &props); err != nil {
		return err
	}
	if _, marked := extra(props)[markManaged]; marked {
		return fmt.Errorf("control: %s carries %s: it is not an unmarked VM", providerID, markManaged)
	}
	if err := powerOff(ctx, vm); err != nil {
		return err
	}
	return destroy(ctx, vm)
}

// Stall holds every call at the front.
func (c control) Stall() func() { return c.v.hold(c.v.gate.Stall()) }

// opMethods says which SOAP methods serve each provider operation: a Get
// reads the VM by the reference the provider remembers, and a list reads
// the folder's view (both RetrievePropertiesEx); a Get whose read finds
// the reference gone looks the VM up by name (FindChild), so vCenter's
// "not found" for a Get is both answers.
var opMethods = map[contracttest.Op][]string{
	contracttest.OpCreate: {"CloneVM_Task"},
	contracttest.OpGet:    {"RetrievePropertiesEx"},
	contracttest.OpList:   {"RetrievePropertiesEx"},
	contracttest.OpDelete: {"Destroy_Task"},
}

// faultFor is vSphere's own fault for each class.
func faultFor(class error) types.BaseMethodFault {
	switch {
	case errors.Is(class, contract.ErrNotFound):
		return &types.ManagedObjectNotFound{}
	case errors.Is(class, contract.ErrQuota):
		return &types.InsufficientResourcesFault{}
	case errors.Is(class, contract.ErrPermanent):
		return &types.NoPermission{PrivilegeId: "VirtualMachine.Provisioning.Clone"}
	default:
		return &types.HostCommunication{}
	}
}

// callFault is vSphere's fault of class for the call m, the call itself
// refused rather than a task it started: for a privilege the caller
// lacks, NoPermission naming the call's object and the privilege, as
// vCenter answers a method whose required privilege the session does not
// hold (API reference, vim.fault.NoPermission: "Thrown when an operation
// is denied because of privileges not held on managed object(s)", its
// object and privilegeId, and missingPrivileges since 7.0.3.2).
func callFault(class error, m *simulator.Method) types.BaseMethodFault {
	f := faultFor(class)
	if denied, ok := f.(*types.NoPermission); ok {
		denied.Object = &m.This
		denied.PrivilegeId = cmp.Or(privileges[m.Name], "System.View")
		denied.MissingPrivileges = []types.NoPermissionEntityPrivileges{{Entity: m.This, PrivilegeIds: []string{denied.PrivilegeId}}}
	}
	return f
}

// privileges are the privileges the provider's calls on a VM need on it
// (API reference, each method's "Required Privileges";
// VirtualMachine.Config.AdvancedConfig for the extraConfig a reconfigure
// writes). Any other call (a read, a task's wait) is refused for
// System.View, seeing the object.
var privileges = map[string]string{
	"CloneVM_Task":    "VirtualMachine.Provisioning.Clone",
	"Destroy_Task":    "VirtualMachine.Inventory.Delete",
	"PowerOnVM_Task":  "VirtualMachine.Interact.PowerOn",
	"PowerOffVM_Task": "VirtualMachine.Interact.PowerOff",
	"ReconfigVM_Task": "VirtualMachine.Config.AdvancedConfig",
}

// FailNext injects vSphere's fault of the class into the method serving op.
func (c control) FailNext(op contracttest.Op, class error) error {
	methods := opMethods[op]
	if op == contracttest.OpGet && errors.Is(class, contract.ErrNotFound) {
		methods = append(methods, "FindChild")
	}
	for _, m := range methods {
		c.v.model.Service.AddFaultRule(&simulator.FaultInjectionRule{
			MethodName: m, ObjectType: "*", ObjectName: "*", FaultType: simulator.FaultTypeCustom,
			Fault: faultFor(class), MaxCount: 1, Enabled: true, Probability: 1,
		})
	}
	return nil
}

// FailAfterCreate loses the next clone's answer, once vcsim has cloned and
// powered on: the clone stays, the caller sees 502 Bad Gateway.
func (c control) FailAfterCreate() error {
	c.v.mu.Lock()
	defer c.v.mu.Unlock()
	c.v.cutClone = true
	return nil
}

// CutCall loses the n-th front call from now (502 Bad Gateway): before
// vcsim sees it, or after vcsim served it and any task it started ended.
func (c control) CutCall(n int, after bool) error {
	c.v.mu.Lock()
	defer c.v.mu.Unlock()
	c.v.cut = cut{call: c.v.calls.Load() + int64(n), after: after}
	return nil
}

// FailCall refuses the n-th front call from now with vSphere's fault of
// class, before vcsim sees it (refusalSDK), in place of any cut: any call
// of an operation, not only the one FailNext names, as a role missing the
// one privilege a later call needs.
func (c control) FailCall(n int, class error) error {
	path, ok := c.v.refusals[contract.ClassOf(class)]
	if !ok {
		return fmt.Errorf("control: FailCall refuses with Quota or Permanent faults, not %s", contract.ClassOf(class))
	}
	c.v.mu.Lock()
	defer c.v.mu.Unlock()
	c.v.cut = cut{call: c.v.calls.Load() + int64(n), refusal: path}
	return nil
}

// RejectCredentials makes vcsim refuse the operator's logins and, as an
// administrator disabling the account would, ends its open sessions.
func (c control) RejectCredentials(reject bool) {
	if !reject {
		c.v.rejectFrom.Store(0)
	}
	c.v.rejected.Store(reject)
	if reject {
		c.endSessions(context.Background())
	}
}

// RejectCredentialsFrom does RejectCredentials(true) when the n-th call
// from now arrives, before vcsim sees it: a credential revoked partway
// through an operation.
func (c control) RejectCredentialsFrom(n int) error {
	c.v.rejectFrom.Store(c.v.calls.Load() + int64(n))
	return nil
}

// endSessions ends the operator's open sessions, as an administrator can.
func (c control) endSessions(ctx context.Context) {
	var sm mo.SessionManager
	ref := *c.v.client.ServiceContent.SessionManager
	if err := object.NewCommon(c.v.client, ref).Properties(ctx, ref, []string{"sessionList"}, &sm); err != nil {
		log.Printf("control: read the sessions: %v", err)
		return
	}
	var keys []string
	for _, s := range sm.SessionList {
		if s.UserName == testUser {
			keys = append(keys, s.Key)
		}
	}
	if len(keys) == 0 {
		return
	}
	if err := session.NewManager(c.v.client).TerminateSession(ctx, keys); err != nil {
		log.Printf("control: end the operator's sessions: %v", err)
	}
}

// Reset lets held calls, locks and deletes go, drops queued faults and
// cuts, and accepts the operator's credential again.
func (c control) Reset() {
	c.v.model.Service.ClearFaultRules()
	c.v.listGate.Stall()()
	c.v.rejected.Store(false)
	c.v.rejectFrom.Store(0)
	c.v.mu.Lock()
	held := c.v.held
	c.v.held, c.v.cut, c.v.cutClone, c.v.powerOnFault = nil, cut{}, false, nil
	c.v.mu.Unlock()
	for _, release := range held {
		release()
	}
}

// UserData decodes guestinfo.userdata as cloud-init's VMware datasource does.
func (c control) UserData(ctx context.Context, providerID string) ([]byte, error) {
	vm, err := c.vm(ctx, providerID)
	if err != nil {
		return nil, err
	}
	var props mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"config.extraConfig"}, &props); err != nil {
		return nil, err
	}
	e := extra(props)
	if e["guestinfo.userdata.encoding"] != "base64" {
		return nil, fmt.Errorf("guestinfo.userdata.encoding is %q", e["guestinfo.userdata.encoding"])
	}
	return base64.StdEncoding.DecodeString(e["guestinfo.userdata"])
}

// Calls counts SOAP requests through the front.
func (c control) Calls() int { return int(c.v.calls.Load()) }

// scope is one region's part of the inventory: its VM folder, and the
// directory on disk behind each zone's datastore.
type scope struct {
	folder     *object.Folder
	datastores map[string]string // "[name] " prefix -> vcsim's local directory
	datacenter string
}

// inventoryScope resolves, through vcsim's API, every region's folder and
// the local directory vcsim keeps each zone's datastore in.
func (v *vcsim) inventoryScope(t testing.TB) []scope {
	t.Helper()
	ctx := context.Background()
	var out []scope
	for _, rn := range slices.Sorted(maps.Keys(v.cfg.Regions)) {
		region := v.cfg.Regions[rn]
		f := find.NewFinder(v.client, true)
		folder, err := f.Folder(ctx, region.Folder)
		if err != nil {
			t.Fatal(err)
		}
		dc, err := f.Datacenter(ctx, region.Datacenter)
		if err != nil {
			t.Fatal(err)
		}
		f.SetDatacenter(dc)
		sc := scope{folder: folder, datacenter: region.Datacenter, datastores: map[string]string{}}
		for _, zone := range region.Zones {
			ds, err := f.Datastore(ctx, zone.Datastore)
			if err != nil {
				t.Fatal(err)
			}
			var props mo.Datastore
			if err := ds.Properties(ctx, ds.Reference(), []string{"info"}, &props); err != nil {
				t.Fatal(err)
			}
			sc.datastores[ds.Path("")+" "] = props.Info.GetDatastoreInfo().Url
		}
		out = append(out, sc)
	}
	return out
}

// Resources lists what a lifecycle makes and must remove: the marked VMs
// of every region's folder, and the folders on every zone's datastore (a
// VM's disks and files live in a folder of its own, which its destroy
// removes), read from the directory vcsim keeps the datastore in. The
// unmarked VMs the control made itself, and their folders, are left out:
// they are not the provider's to remove.
func (c control) Resources(ctx context.Context) ([]string, error) {
	var out []string
	for _, sc := range c.v.inventory {
		vms, err := folderVMs(ctx, c.v.client, sc.folder)
		if err != nil {
			return nil, err
		}
		unmarked := map[string]bool{}
		for _, vm := range vms {
			if _, marked := extra(vm)[markManaged]; !marked {
				if vm.Config != nil {
					unmarked[strings.TrimSuffix(vm.Config.Files.LogDirectory, "/")] = true
				}
				continue
			}
			out = append(out, "vm "+sc.folder.InventoryPath+"/"+vm.Name)
		}
		for _, prefix := range slices.Sorted(maps.Keys(sc.datastores)) {
			entries, err := os.ReadDir(sc.datastores[prefix])
			if err != nil {
				return nil, err
			}
			for _, entry := range entries {
				if dir := prefix + entry.Name(); entry.IsDir() && !unmarked[dir] {
					out = append(out, "files "+sc.datacenter+" "+dir)
				}
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// folderVMs reads the VMs of a folder through a container view, which
// skips a VM destroyed while it is read rather than failing.
func folderVMs(ctx context.Context, client *vim25.Client, folder *object.Folder) ([]mo.VirtualMachine, error) {
	v, err := view.NewManager(client).CreateContainerView(ctx, folder.Reference(), []string{"VirtualMachine"}, true)
	if err != nil {
		return nil, err
	}
	defer func() { _ = v.Destroy(context.WithoutCancel(ctx)) }()
	var vms []mo.VirtualMachine
	err = v.Retrieve(ctx, []string{"VirtualMachine"}, []string{"name", "config.extraConfig", "config.files.logDirectory"}, &vms)
	return vms, err
}

// sessionsOf counts the sessions vCenter holds for user.
func (v *vcsim) sessionsOf(t *testing.T, user string) int {
	t.Helper()
	var sm mo.SessionManager
	if err := property.DefaultCollector(v.client).RetrieveOne(context.Background(), *v.client.ServiceContent.SessionManager, []string{"sessionList"}, &sm); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range sm.SessionList {
		if s.UserName == user {
			n++
		}
	}
	return n
}
