package proxmox

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kdomanski/iso9660"
	pve "github.com/luthermonson/go-proxmox"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
	"github.com/egress-proxies/egress-proxies-operator/providers/proxmox/pvefake"
)

// The test backend is pvefake, the module's stateful fake of the PVE API,
// over TLS. Everything the harness needs from the backend that the
// provider must not do — the guest agent answering, locks, faults,
// unmarked VMs — the control below does through the fake's control API.

const (
	testTokenID  = "egress@pve!operator"
	testSecret   = "sentinel-secret-3b9d51f0-7c2e-4a61-9f0e-d2a7c4e81b55"
	templateVMID = 9000
	testRegion   = "lab"
)

var (
	testPlacement = contract.Placement{Region: testRegion, Zone: "a", MachineType: "small", Image: "debian-12"}
	// otherPlacement is zone b, on the second node, with the same image:
	// it names a template per node (debian-12-proxy on pve1 and on pve2,
	// each on local storage), and each zone clones its node's, as a clone
	// of a template on local storage cannot go to another node
	// (qemu-server API2/Qemu.pm clone_vm: "can't clone VM to node '…' (VM
	// uses local storage)").
	otherPlacement = contract.Placement{Region: testRegion, Zone: "b", MachineType: "small", Image: "debian-12"}
)

type fake struct {
	s   *pvefake.Server
	cfg Config

	mu sync.Mutex
	// unmarked are the VMIDs CreateUnmarked made: a person's VMs, which
	// no lifecycle of the provider makes or removes.
	unmarked map[int]bool
}

func startFake(t *testing.T) *fake { return startFakeOpts(t, nil) }

// startFakeOpts starts a two-node fake; change adjusts its options.
func startFakeOpts(t *testing.T, change func(*pvefake.Options)) *fake {
	t.Helper()
	opts := pvefake.Options{
		Nodes: []string{"pve1", "pve2"},
		Storages: []pvefake.StorageSpec{
			{Name: "local", Type: "dir", Content: []string{"iso", "vztmpl", "backup", "import"}},
			{Name: "local-lvm", Type: "lvmthin", Content: []string{"images", "rootdir"}},
		},
		Templates: []pvefake.Template{
			{VMID: templateVMID, Name: "debian-12-proxy", Node: "pve1"},
			{VMID: templateVMID + 1, Name: "debian-12-proxy", Node: "pve2"},
		},
		TokenID: testTokenID, Secret: testSecret,
	}
	if change != nil {
		change(&opts)
	}
	if opts.Version == 0 {
		opts.Version = 9
	}
	if opts.ACL == nil {
		// The role docs/proxmox-provider.md documents, on its paths.
		opts.ACL = testACL(t, opts.Version, opts.Storages)
	}
	s := pvefake.New(opts)
	t.Cleanup(s.Close)
	servedBy(s)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, string(data))
		return p
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	cfg := Config{
		Regions: map[string]Region{testRegion: {
			Endpoint: s.URL, TokenIDFile: write("token-id", []byte(testTokenID+"\n")), TokenSecretFile: write("token-secret", []byte(testSecret+"\n")),
			CAFile: write("ca.pem", ca), VMIDs: VMIDRange{Min: 1000, Max: 1099},
			Zones: map[string]Zone{"a": {Node: "pve1", ISOStorage: "local"}, "b": {Node: "pve2", ISOStorage: "local"}},
		}},
		MachineTypes: map[string]MachineType{"small": {Cores: 1, MemoryMiB: 512}},
		Images:       map[string]Image{"debian-12": {TemplateName: "debian-12-proxy"}},
		CallTimeout:  contract.Duration{Duration: time.Second},
		TaskTimeout:  contract.Duration{Duration: 10 * time.Second},
	}
	return &fake{s: s, cfg: cfg, unmarked: map[int]bool{}}
}

func (f *fake) provider(t *testing.T) *Provider {
	t.Helper()
	p, err := New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// control is the harness's backend control over the fake.
type control struct{ f *fake }

var (
	_ contracttest.GuestReporter          = control{}
	_ contracttest.StateInjector          = control{}
	_ contracttest.PowerOffer             = control{}
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
	_ contracttest.Inventory              = control{}
	_ contracttest.CallCutter             = control{}
	_ contracttest.CallFailer             = control{}
	_ contracttest.Resetter               = control{}
	_ contracttest.LegacyCreator          = control{}
)

func vmidOf(providerID string) (int, error) {
	_, key, err := ids.Parse(providerID)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(key)
}

// ReportIP plays the QEMU guest agent reporting the guest's address.
func (c control) ReportIP(_ context.Context, providerID, ip string) error {
	vmid, err := vmidOf(providerID)
	if err != nil {
		return err
	}
	return c.f.s.ReportIP(vmid, ip)
}

// PowerOff stops the VM as a person's qm stop does.
func (c control) PowerOff(_ context.Context, providerID string) error {
	vmid, err := vmidOf(providerID)
	if err != nil {
		return err
	}
	return c.f.s.StopVM(vmid)
}

// SetUnknownState puts QEMU in "colo", a run state the table does not list.
func (c control) SetUnknownState(_ context.Context, providerID string) error {
	vmid, err := vmidOf(providerID)
	if err != nil {
		return err
	}
	return c.f.s.SetQMPStatus(vmid, "colo")
}

// CreateUnstarted runs Create's steps 1–3 and stops before the start.
func (c control) CreateUnstarted(ctx context.Context, req contract.CreateRequest) (string, error) {
	p, err := New(c.f.cfg)
	if err != nil {
		return "", err
	}
	pl, err := p.plan(req)
	if err != nil {
		return "", err
	}
	vms, err := p.resources(ctx, pl.region)
	if err != nil {
		return "", err
	}
	v, err := p.cloneNew(ctx, pl, req, vms)
	if err != nil {
		return "", err
	}
	if err := p.prepare(ctx, pl, req, &v); err != nil {
		return "", err
	}
	return ids.Format(pl.region, strconv.Itoa(v.vmid)), nil
}

// Lock holds `lock: clone` on the VM, as a clone in progress does.
func (c control) Lock(_ context.Context, providerID string) (func(), error) {
	vmid, err := vmidOf(providerID)
	if err != nil {
		return nil, err
	}
	return c.f.s.Lock(vmid, "clone")
}

// BeginDelete starts a qmdestroy and holds it.
func (c control) BeginDelete(_ context.Context, providerID string) (func(), error) {
	vmid, err := vmidOf(providerID)
	if err != nil {
		return nil, err
	}
	return c.f.s.BeginDestroy(vmid)
}

// CreateUnmarked clones the template as a person would: a name, no marks,
// on the placement's node.
func (c control) CreateUnmarked(_ context.Context, name string, pl contract.Placement) (string, error) {
	zone, ok := c.f.cfg.Regions[pl.Region].Zones[pl.Zone]
	if !ok {
		return "", fmt.Errorf("no zone %q in region %q", pl.Zone, pl.Region)
	}
	vmid, err := c.f.s.CloneVMTo(templateVMID, zone.Node, name)
	if err != nil {
		return "", err
	}
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	c.f.unmarked[vmid] = true
	return ids.Format(pl.Region, strconv.Itoa(vmid)), nil
}

// CreateUIDMarked clones the template as a person copying one of the
// operator's VMs and taking its managed marks off would: the UID's tag and
// description line, no managed tag, owner tag or managed line.
func (c control) CreateUIDMarked(ctx context.Context, name string, pl contract.Placement, uid string) (string, error) {
	id, err := c.CreateUnmarked(ctx, name, pl)
	if err != nil {
		return "", err
	}
	vmid, err := vmidOf(id)
	if err != nil {
		return "", err
	}
	if err := c.f.s.SetConfig(vmid, "tags", tagUID+uid); err != nil {
		return "", err
	}
	return id, c.f.s.SetConfig(vmid, "description", "A copy of an egress proxy.\n"+descUID+uid+"\n")
}

// DeleteUnmarked removes a VM CreateUnmarked or CreateUIDMarked made, as a
// person would; a VM that carries the operator's managed marks is left
// alone.
func (c control) DeleteUnmarked(_ context.Context, providerID string) error {
	vmid, err := vmidOf(providerID)
	if err != nil {
		return err
	}
	conf, ok := c.f.s.Config(vmid)
	if !ok {
		return contract.NotFound(fmt.Errorf("control: no VM %d", vmid))
	}
	if m := readMarks(conf["tags"], conf["description"]); m.managed() {
		return fmt.Errorf("VM %d carries the operator's marks; not removing it", vmid)
	}
	c.f.s.RemoveVM(vmid)
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	delete(c.f.unmarked, vmid)
	return nil
}

// CreateLegacy makes the VM as the previous release (contract v0.2) left
// it: Create's steps, then the marks as that release wrote them, through
// the PVE API — no owner tag, "managed=true" in the description.
func (c control) CreateLegacy(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
	p, err := New(c.f.cfg)
	if err != nil {
		return contract.Instance{}, err
	}
	inst, err := p.Create(ctx, req)
	if err != nil {
		return contract.Instance{}, err
	}
	vmid, err := vmidOf(inst.ProviderID)
	if err != nil {
		return contract.Instance{}, err
	}
	conf, ok := c.f.s.Config(vmid)
	if !ok {
		return contract.Instance{}, fmt.Errorf("control: no VM %d", vmid)
	}
	tags := slices.DeleteFunc(splitTags(conf["tags"]), func(t string) bool { return strings.HasPrefix(t, tagOwner) })
	desc := strings.Replace(conf["description"], descManaged+req.Owner+"\n", descManaged+contract.LegacyManagedValue+"\n", 1)
	api, _, _, err := p.regions[req.Placement.Region].client()
	if err != nil {
		return contract.Instance{}, err
	}
	err = newVM(api, c.f.s.Node(vmid), vmid).ConfigSync(ctx,
		pve.VirtualMachineOption{Name: "tags", Value: strings.Join(tags, ";")},
		pve.VirtualMachineOption{Name: "description", Value: desc})
	return inst, err
}

// CutCall loses the n-th API call from now, before or after it took effect.
func (c control) CutCall(n int, after bool) error {
	c.f.s.CutCall(n, after)
	return nil
}

// Reset lifts every fault, cut, stall, hold, lock and token refusal.
func (c control) Reset() { c.f.s.Reset() }

// Stall holds every API call.
func (c control) Stall() func() { return c.f.s.Stall() }

// pveFault is PVE's own answer of class to an API call, false for a class
// it has none for: a VM's config missing (pve-guest-common
// AbstractConfig.pm load_config); a storage full, as PVE has no quota API
// (ENOSPC on a volume's write); a privilege missing (pve-access-control
// RPCEnvironment.pm check → pve-common raise_perm_exc); the config's lock
// held (pve-common Tools.pm lock_file), transient.
func pveFault(class error) (status int, msg string, ok bool) {
	switch {
	case errors.Is(class, contract.ErrNotFound):
		return 500, "Configuration file 'nodes/pve1/qemu-server/1000.conf' does not exist", true
	case errors.Is(class, contract.ErrQuota):
		return 500, "error writing '/var/lib/vz/images/1000/vm-1000-disk-0.qcow2' - No space left on device", true
	case errors.Is(class, contract.ErrPermanent):
		return 403, "Permission check failed (/vms/1000, VM.Allocate)", true
	case class == nil:
		return 500, "can't lock file '/var/lock/qemu-server/lock-1000.conf' - got timeout", true
	}
	return 0, "", false
}

// FailNext fails the call serving op with PVE's own answer for class.
func (c control) FailNext(op contracttest.Op, class error) error {
	target := map[contracttest.Op]pvefake.Op{
		contracttest.OpCreate: pvefake.OpClone, contracttest.OpGet: pvefake.OpCurrent,
		contracttest.OpList: pvefake.OpResources, contracttest.OpDelete: pvefake.OpDestroy,
	}[op]
	if errors.Is(class, contract.ErrQuota) && op == contracttest.OpCreate {
		// A full thin pool fails the clone's task, not its request.
		c.f.s.FailNextTask("qmclone", `clone failed: lvcreate 'pve/vm-1000-disk-0' error:   Volume group "pve" has insufficient free space (1023 extents): 2048 required.`)
		return nil
	}
	status, msg, ok := pveFault(class)
	if !ok {
		return fmt.Errorf("no PVE fault for class %w", class)
	}
	c.f.s.FailNext(target, status, msg)
	return nil
}

// FailCall fails the n-th API call from now, whatever it serves, with
// PVE's own answer for class (pveFault): quota or permanent, the classes
// any call can meet.
func (c control) FailCall(n int, class error) error {
	if !errors.Is(class, contract.ErrQuota) && !errors.Is(class, contract.ErrPermanent) {
		return fmt.Errorf("no PVE fault of class %w for any call", class)
	}
	status, msg, _ := pveFault(class)
	c.f.s.FailCall(n, status, msg)
	return nil
}

// FailAfterCreate makes the next clone complete and its answer be lost.
func (c control) FailAfterCreate() error {
	c.f.s.DropNextClone()
	return nil
}

// RejectCredentials makes the fake refuse the token.
func (c control) RejectCredentials(reject bool) { c.f.s.RejectToken(reject) }

// RejectCredentialsFrom refuses the token from the n-th API call on.
func (c control) RejectCredentialsFrom(n int) error {
	c.f.s.RejectTokenFrom(n)
	return nil
}

// UserData reads user-data from the seed ISO on the VM's cdrom, as
// cloud-init's NoCloud datasource does.
func (c control) UserData(_ context.Context, providerID string) ([]byte, error) {
	vmid, err := vmidOf(providerID)
	if err != nil {
		return nil, err
	}
	conf, ok := c.f.s.Config(vmid)
	if !ok {
		return nil, fmt.Errorf("no VM %d", vmid)
	}
	volid, _, _ := strings.Cut(conf["ide2"], ",")
	iso, ok := c.f.s.Volume(c.f.s.Node(vmid), volid)
	if !ok {
		return nil, fmt.Errorf("VM %d's cdrom %q is not on the storage", vmid, conf["ide2"])
	}
	return readISOFile(iso, "user-data")
}

func readISOFile(iso []byte, name string) ([]byte, error) {
	img, err := iso9660.OpenImage(bytes.NewReader(iso))
	if err != nil {
		return nil, err
	}
	if label, err := img.Label(); err != nil || label != "cidata" {
		return nil, fmt.Errorf("volume label %q (%w), want cidata", label, err)
	}
	root, err := img.RootDir()
	if err != nil {
		return nil, err
	}
	files, err := root.GetChildren()
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if strings.EqualFold(strings.TrimSuffix(f.Name(), ";1"), name) {
			return io.ReadAll(f.Reader())
		}
	}
	return nil, fmt.Errorf("no %s on the seed", name)
}

// Calls counts API calls the fake served.
func (c control) Calls() int { return c.f.s.Calls() }

// Resources lists the fake's VMs, volumes and running tasks: what a
// lifecycle of the provider makes and must remove. The VMs CreateUnmarked
// made are a person's and are left out while they carry no marks (a
// provider that marked one, adopting it, shows it again).
//
// ListByTagExcludesUnmarked hands its unmarked VM to the provider's Delete
// at cleanup (rules_list.go: e.track, not e.trackForeign), which rightly
// leaves a VM without marks alone (§8); without this the rule would report
// that VM as left behind.
func (c control) Resources(context.Context) ([]string, error) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	var out []string
	for _, r := range c.f.s.Inventory() {
		var vmid int
		if _, err := fmt.Sscanf(r, "vm %d ", &vmid); err == nil && c.f.unmarked[vmid] {
			if conf, ok := c.f.s.Config(vmid); ok && !readMarks(conf["tags"], conf["description"]).managed() {
				continue
			}
		}
		out = append(out, r)
	}
	return out, nil
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
