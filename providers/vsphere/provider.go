// Package vsphere is the egress-proxies provider for VMware vSphere, on
// govmomi: it clones proxy VMs from a template, hands them cloud-init
// through guestinfo (cloud-init's VMware datasource), and reads their
// address from VMware Tools. docs/vsphere-provider-spec.md gives every
// decision and its reason; docs/vsphere-provider.md is the guide.
package vsphere

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Type is the provider's type in the providers config.
const Type = "vsphere"

// The marks, written into the VM's extraConfig by the clone itself
// (gc-mark: written-metadata). They are not guestinfo.* keys, which a guest
// can set from inside; these only the API can.
const (
	// markManaged's value is the CreateRequest.Owner that made the VM, or
	// contract.LegacyManagedValue on a VM of an earlier release.
	markManaged = "egressproxies.managed"
	markUID     = "egressproxies.uid"
	// markStarted says the VM has been started: Create writes it once a
	// power-on succeeded (the clone's or its own), never before, so a
	// powered-off VM without it has never run (provisioning-state:
	// marker), a clone whose power-on failed included.
	markStarted = "egressproxies.started"
	// markDeleting's value is the time a Delete began (RFC 3339): written
	// before the power-off, so the VM reads Terminated while that Delete
	// powers it off and starts the destroy, never Stopped (deleting.go).
	markDeleting = "egressproxies.deleting"
)

// MaxCloudInit bounds CloudInit: guestinfo values live in the VM's
// configuration, which vSphere keeps small.
const MaxCloudInit = 64 << 10

// destroyTask is the descriptionId of a VM's Destroy_Task.
const destroyTask = "VirtualMachine.destroy"

var ids = contract.IDFormat{
	Location: keyRE,
	Key:      regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`),
}

// Provider is the vSphere provider. One SOAP session serves every call; it
// is made on first use and again after it expires or the credential files
// change.
type Provider struct {
	cfg        Config
	user, pass contract.SecretFile

	mu     sync.Mutex
	client *vim25.Client
	// login is the login in flight, nil when none (session).
	login *loginCall
	// refs caches, for the session, the inventory objects the config names
	// (folders, templates, pools, datastores, networks): each finder lookup
	// costs several round trips, and they seldom change. An object a
	// ManagedObjectNotFound names is dropped (forgetMissing), so one
	// deleted and made again is looked up afresh.
	refs map[string]object.Reference
	// lists shares each region's folder listings (sharedlist.go).
	lists map[string]*freshCall[[]vmRead]
	// vms remembers the instances' references (vmrefs.go).
	vms vmRefs
}

var (
	_ contract.Provider = (*Provider)(nil)
	_ contract.Checker  = (*Provider)(nil)
)

// New validates cfg and returns a provider. It does not dial (contract §7).
func New(cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("vsphere provider config: %w", err)
	}
	return &Provider{cfg: cfg.withDefaults(), user: contract.SecretFile{Path: cfg.UsernameFile}, pass: contract.SecretFile{Path: cfg.PasswordFile},
		lists: map[string]*freshCall[[]vmRead]{}}, nil
}

// forgetMissing drops from the cache the object a ManagedObjectNotFound
// names, so it is looked up afresh next time, and says whether the fault
// named a cached object; the rest stays. Most such faults name an instance VM (destroyed by
// a racing Delete), which is never cached; one that names no object
// empties the cache. A path the finder did not find names nothing cached:
// a failed lookup is not stored.
func (p *Provider) forgetMissing(c *vim25.Client, err error) (dropped bool) {
	var missing *types.ManagedObjectNotFound
	if err == nil {
		return false
	}
	if _, ok := fault.As(err, &missing); !ok {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client != c {
		return false
	}
	for key, obj := range p.refs {
		if missing.Obj.Value == "" || obj.Reference() == missing.Obj {
			delete(p.refs, key)
			dropped = true
		}
	}
	// A fault naming no object is not known to be a location's: the
	// cache goes, the call's answer stands.
	return dropped && missing.Obj.Value != ""
}

// ref returns the inventory object at path in the region's datacenter,
// from the session's cache when it was looked up before. field is the
// config field that names it: a lookup that fails names both
// (locationError).
func ref[T object.Reference](ctx context.Context, p *Provider, c *vim25.Client, regionName, field, path string, lookup func(*find.Finder, context.Context, string) (T, error)) (T, error) {
	region := p.cfg.Regions[regionName]
	key := fmt.Sprintf("%T %s %s", lookup, region.Datacenter, path)
	p.mu.Lock()
	cached, ok := p.refs[key].(T)
	p.mu.Unlock()
	if ok {
		return cached, nil
	}
	var zero T
	f, err := p.finder(ctx, c, region)
	if err != nil {
		return zero, locationError(datacenterField(regionName), region.Datacenter, err)
	}
	obj, err := lookup(f, ctx, path)
	if err != nil {
		return zero, locationError(field, path, err)
	}
	p.mu.Lock()
	if p.client == c {
		p.refs[key] = obj
	}
	p.mu.Unlock()
	return obj, nil
}

// folder returns the region's VM folder.
func (p *Provider) folder(ctx context.Context, c *vim25.Client, regionName string) (*object.Folder, error) {
	return ref(ctx, p, c, regionName, folderField(regionName), p.cfg.Regions[regionName].Folder, (*find.Finder).Folder)
}

// Create clones the VM from the image's template with the marks and the
// cloud-init in its extraConfig, powered on by the clone task itself
// (create-return: blocking; each step resumes a cut-off attempt, template
// entry 10):
//  1. find the VM by name in the region's folder: ours → resume; not ours → collision;
//  2. clone and power on in one task (DuplicateName: a racing attempt cloned it → resume);
//     with a static network, clone powered off (network.go);
//  3. a VM never started with a static network: write the network into its
//     metadata (needsNetwork, deliverNetwork);
//  4. a VM found powered off (the clone's power-on failed, or left off for
//     step 3): power it on; then, the VM on, mark it started if it is not
//     (start).
func (p *Provider) Create(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
	plan, err := p.plan(req)
	if err != nil {
		return contract.Instance{}, err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues(contract.LogKeyInstance, req.Name)
	ctx = logr.NewContext(ctx, log)

	vm, err := p.lookup(ctx, plan.regionName, req.Name)
	if errors.Is(err, contract.ErrNotFound) {
		var cloned types.ManagedObjectReference
		cloned, err = p.clone(ctx, plan, req)
		switch {
		case err == nil:
			log.V(contract.LogOutcome).Info("cloned instance", "template", plan.template)
			p.vms.put(plan.regionName, req.Name, cloned)
			var more []string
			if req.Network != nil {
				// The clone's MAC, for its network, in the same read.
				more = []string{"config.hardware.device"}
			}
			vm, err = p.read(ctx, cloned, more...)
		case isDuplicateName(err):
			vm, err = p.lookup(ctx, plan.regionName, req.Name)
		}
	}
	if err != nil {
		return contract.Instance{}, err
	}
	if !owned(vm.VirtualMachine, req.UID) {
		return contract.Instance{}, contract.Permanentf("a VM named %q already exists in folder %q and does not belong to this Proxy (uid %s)", req.Name, plan.region.Folder, req.UID)
	}
	if vm.destroying || p.deleting(vm) {
		// A Delete has begun: powering it on would undo it. Transient:
		// once the VM is gone, the next Create clones afresh.
		return contract.Instance{}, fmt.Errorf("the VM %q in folder %q is being deleted", req.Name, plan.region.Folder)
	}
	if needsNetwork(vm, req.Network) {
		if err := p.deliverNetwork(ctx, vm, req.Name, req.Network); err != nil {
			return contract.Instance{}, err
		}
	}
	if err := p.start(ctx, &vm); err != nil {
		return contract.Instance{}, err
	}
	return p.instance(plan.regionName, vm), nil
}

// start powers the VM on if it is off, then marks it started if it is not
// yet. The mark follows a power-on that succeeded: a VM whose power-on
// failed, in the clone or here, has never run and reads Provisioning, not
// Stopped (provisioning-state: marker). A VM that ran but was cut off
// before its mark reads by its power state while on, and Provisioning if
// powered off before the mark: the next Create powers it on again.
func (p *Provider) start(ctx context.Context, vm *vmRead) error {
	obj := func(c *vim25.Client) *object.VirtualMachine { return object.NewVirtualMachine(c, vm.Reference()) }
	if vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
		err := p.do(ctx, "PowerOn", p.cfg.TaskTimeout.Duration, func(ctx context.Context, c *vim25.Client) error {
			task, err := obj(c).PowerOn(ctx)
			if err != nil {
				return err
			}
			err = task.Wait(ctx)
			if isAlreadyOn(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
		vm.Runtime.PowerState = types.VirtualMachinePowerStatePoweredOn
		logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("powered on instance")
	}
	if extra(vm.VirtualMachine)[markStarted] == "true" {
		return nil
	}
	return p.do(ctx, "MarkStarted", p.cfg.TaskTimeout.Duration, func(ctx context.Context, c *vim25.Client) error {
		task, err := obj(c).Reconfigure(ctx, types.VirtualMachineConfigSpec{ExtraConfig: []types.BaseOptionValue{
			&types.OptionValue{Key: markStarted, Value: "true"},
		}})
		if err != nil {
			return err
		}
		return task.Wait(ctx)
	})
}

// clone runs step 2 of Create and returns the new VM. Powering on in the
// clone task saves a PowerOn task and its round trips; a power-on fault
// fails the task but leaves the clone, unmarked and so Provisioning, which
// step 3 of the next attempt powers on.
func (p *Provider) clone(ctx context.Context, plan plan, req contract.CreateRequest) (types.ManagedObjectReference, error) {
	var cloned types.ManagedObjectReference
	err := p.do(ctx, "CloneVM", p.cfg.TaskTimeout.Duration, func(ctx context.Context, c *vim25.Client) error {
		tmpl, err := ref(ctx, p, c, plan.regionName, imageField(plan.image), plan.template, (*find.Finder).VirtualMachine)
		if err != nil {
			return err
		}
		folder, err := p.folder(ctx, c, plan.regionName)
		if err != nil {
			return err
		}
		pool, err := ref(ctx, p, c, plan.regionName, plan.field("resourcePool"), plan.zone.ResourcePool, (*find.Finder).ResourcePool)
		if err != nil {
			return err
		}
		poolRef := pool.Reference()
		spec := types.VirtualMachineCloneSpec{
			Location: types.VirtualMachineRelocateSpec{Pool: &poolRef},
			// A static network is written once the clone has its MAC,
			// before its first boot (network.go).
			PowerOn: req.Network == nil,
			Config: &types.VirtualMachineConfigSpec{
				NumCPUs:     plan.machine.CPUs,
				MemoryMB:    plan.machine.MemoryMiB,
				ExtraConfig: extraConfig(req),
			},
		}
		var sees hostNeeds
		if plan.zone.Network != "" {
			net, err := ref(ctx, p, c, plan.regionName, plan.field("network"), plan.zone.Network, (*find.Finder).Network)
			if err != nil {
				return err
			}
			sees.network = &named{net.Reference(), plan.zone.Network}
			change, err := nicChange(ctx, net, tmpl)
			if err != nil {
				return err
			}
			spec.Config.DeviceChange = change
		} else if req.Network != nil {
			// Without a zone network the template's cards are not read
			// above; a static address needs one, known before the clone.
			if _, err := templateNIC(ctx, tmpl); err != nil {
				return err
			}
		}
		if err := p.cloneOptions(ctx, plan, tmpl, &spec); err != nil {
			return err
		}
		if err := p.placeStorage(ctx, c, plan, tmpl, folder, req.Name, &spec); err != nil {
			return err
		}
		sees.datastore = &named{*spec.Location.Datastore, cmp.Or(plan.zone.Datastore, "the datastore storage DRS recommended")}
		if p.cfg.CloneMode == linkedClone {
			sees.template = tmpl
		}
		if spec.Location.Host, err = p.hostFor(ctx, c, plan, pool, sees); err != nil {
			return err
		}
		task, err := tmpl.Clone(ctx, folder, req.Name, spec)
		if err != nil {
			return err
		}
		info, err := task.WaitForResult(ctx)
		if err != nil {
			return err
		}
		ref, ok := info.Result.(types.ManagedObjectReference)
		if !ok {
			return fmt.Errorf("clone task returned %T, not the VM", info.Result)
		}
		cloned = ref
		return nil
	})
	return cloned, err
}

// read reads a VM by reference, with the properties more besides vmProps.
func (p *Provider) read(ctx context.Context, ref types.ManagedObjectReference, more ...string) (vm vmRead, err error) {
	err = p.do(ctx, "ReadVM", p.cfg.CallTimeout.Duration, func(ctx context.Context, c *vim25.Client) error {
		vms, err := readVMs(ctx, c, ref, more...)
		if err == nil && len(vms) != 1 {
			err = contract.NotFound(fmt.Errorf("no VM %s", ref.Value))
		}
		if err == nil {
			vm = vms[0]
		}
		return err
	})
	return vm, err
}

// extraConfig is what the clone writes: the marks and the cloud-init
// (guestinfo keys of cloud-init's VMware datasource, base64 so the bytes
// arrive unchanged). With a static network, markAddress too; the
// metadata's network is written after the clone, once its MAC is known
// (deliverNetwork).
func extraConfig(req contract.CreateRequest) []types.BaseOptionValue {
	meta, _ := metadata(req.Name, nil, "") // without a network it cannot fail
	out := []types.BaseOptionValue{
		&types.OptionValue{Key: markManaged, Value: req.Owner},
		&types.OptionValue{Key: markUID, Value: req.UID},
		&types.OptionValue{Key: "guestinfo.userdata", Value: base64.StdEncoding.EncodeToString(req.CloudInit)},
		&types.OptionValue{Key: "guestinfo.userdata.encoding", Value: "base64"},
	}
	if req.Network != nil {
		out = append(out, &types.OptionValue{Key: markAddress, Value: req.Network.IP()})
	}
	return append(out, metadataOptions(meta)...)
}

// metadataOptions are the guestinfo keys of the metadata, base64 so the
// bytes arrive unchanged.
func metadataOptions(meta []byte) []types.BaseOptionValue {
	return []types.BaseOptionValue{
		&types.OptionValue{Key: "guestinfo.metadata", Value: base64.StdEncoding.EncodeToString(meta)},
		&types.OptionValue{Key: "guestinfo.metadata.encoding", Value: "base64"},
	}
}

// nicChange points the template's first network card at net.
func nicChange(ctx context.Context, net object.NetworkReference, tmpl *object.VirtualMachine) ([]types.BaseVirtualDeviceConfigSpec, error) {
	backing, err := net.EthernetCardBackingInfo(ctx)
	if err != nil {
		return nil, err
	}
	card, err := templateNIC(ctx, tmpl)
	if err != nil {
		return nil, err
	}
	nic := card.GetVirtualDevice()
	nic.Backing = backing
	return []types.BaseVirtualDeviceConfigSpec{&types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationEdit, Device: card}}, nil
}

// templateNIC is the template's first network card: the one the zone's
// network and a static address go to. A template without one is a config
// to fix.
func templateNIC(ctx context.Context, tmpl *object.VirtualMachine) (types.BaseVirtualDevice, error) {
	devices, err := tmpl.Device(ctx)
	if err != nil {
		return nil, err
	}
	nics := devices.SelectByType((*types.VirtualEthernetCard)(nil))
	if len(nics) == 0 {
		return nil, contract.Permanentf("template %s has no network card", tmpl.Name())
	}
	return nics[0], nil
}

// plan is a validated request resolved against the catalogues.
type plan struct {
	regionName string
	region     Region
	zoneName   string
	zone       Zone
	machine    MachineType
	image      string // the images key
	template   string
}

// field names a field of the plan's zone in the config.
func (pl plan) field(name string) string { return zoneField(pl.regionName, pl.zoneName, name) }

// plan validates req before any call (contract §1.2).
func (p *Provider) plan(req contract.CreateRequest) (plan, error) {
	if err := req.Validate(); err != nil {
		return plan{}, err
	}
	pl := req.Placement
	region, machine, template, err := contract.LookupPlacement(pl, p.cfg.Regions, p.cfg.MachineTypes, p.cfg.Images)
	if err != nil {
		return plan{}, err
	}
	zone, err := contract.LookupZone(region.Zones, pl.Zone)
	if err != nil {
		return plan{}, err
	}
	if err := contract.CloudInitFits(req.CloudInit, MaxCloudInit, "guestinfo"); err != nil {
		return plan{}, err
	}
	zoneName := pl.Zone
	if zoneName == "" {
		// LookupZone chose the region's only zone.
		zoneName = slices.Collect(maps.Keys(region.Zones))[0]
	}
	return plan{regionName: pl.Region, region: region, zoneName: zoneName, zone: zone, machine: machine, image: pl.Image, template: template}, nil
}

// Get reads the VM.
func (p *Provider) Get(ctx context.Context, providerID string) (contract.Instance, error) {
	regionName, name, err := p.parse(providerID)
	if err != nil {
		return contract.Instance{}, err
	}
	ctx = logr.NewContext(ctx, logr.FromContextOrDiscard(ctx).WithValues(contract.LogKeyInstance, providerID))
	vm, err := p.lookup(ctx, regionName, name)
	if err != nil {
		return contract.Instance{}, err
	}
	return p.instance(regionName, vm), nil
}

// Delete powers the VM off and destroys it, with its disks; a VM already
// gone is success (delete-return: waits).
func (p *Provider) Delete(ctx context.Context, providerID string) error {
	regionName, name, err := ids.Parse(providerID)
	if err != nil {
		return err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues(contract.LogKeyInstance, providerID)
	if _, ok := p.cfg.Regions[regionName]; !ok {
		log.Info("region is no longer configured; nothing to delete", "region", regionName)
		return nil
	}
	ctx = logr.NewContext(ctx, log)
	vm, err := p.lookup(ctx, regionName, name)
	if errors.Is(err, contract.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if vm.destroying {
		// Already being deleted is deleted (contract §4.9); Get says
		// Terminated until the destroy is done.
		log.V(contract.LogOutcome).Info("a destroy of the instance is already under way")
		return nil
	}
	// A mark another Delete left is no proof that it is still under way
	// (it may have failed): this one goes on, and marks afresh.
	err = p.markDeleting(ctx, vm)
	if errors.Is(err, contract.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	err = p.do(ctx, "DestroyVM", p.cfg.TaskTimeout.Duration, func(ctx context.Context, c *vim25.Client) error {
		obj := object.NewVirtualMachine(c, vm.Reference())
		if vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn {
			task, err := obj.PowerOff(ctx)
			if err != nil {
				return err
			}
			if err := waitTask(ctx, task); err != nil && !isAlreadyOff(err) {
				return err
			}
		}
		task, err := obj.Destroy(ctx)
		if err != nil {
			return err
		}
		return waitTask(ctx, task)
	})
	if err != nil && !errors.Is(err, contract.ErrNotFound) {
		return err
	}
	p.vms.forget(regionName, name)
	log.V(contract.LogOutcome).Info("destroyed instance")
	return nil
}

// ListByTag lists the VMs of every region's folder in one view each and
// keeps the marked ones whose mark has exactly the value: an Owner (or
// "true") for markManaged, so installs sharing a folder never list each
// other's VMs; any owner's for markUID. vSphere cannot filter extraConfig
// on the server; the folder is the operator's own, so the scan is of its
// VMs (list-partial: fail-whole).
func (p *Provider) ListByTag(ctx context.Context, key, value string) ([]contract.Instance, error) {
	mark, ok := map[string]string{contract.LabelManaged: markManaged, contract.LabelUID: markUID}[key]
	if !ok {
		return nil, contract.InvalidField("key", key, "one of "+contract.LabelManaged+", "+contract.LabelUID)
	}
	var out []contract.Instance
	for _, regionName := range slices.Sorted(maps.Keys(p.cfg.Regions)) {
		vms, err := p.listFolder(ctx, regionName)
		if err != nil {
			return nil, err
		}
		for _, vm := range vms {
			if e := extra(vm.VirtualMachine); e[markManaged] != "" && e[mark] == value {
				out = append(out, p.instance(regionName, vm))
			}
		}
	}
	return out, nil
}

// lookup finds the VM by name in the region's folder and reads its
// properties; ErrNotFound when there is none.
func (p *Provider) lookup(ctx context.Context, regionName, name string) (vmRead, error) {
	region := p.cfg.Regions[regionName]
	var vm vmRead
	err := p.do(ctx, "GetVM", p.cfg.CallTimeout.Duration, func(ctx context.Context, c *vim25.Client) error {
		folder, err := p.folder(ctx, c, regionName)
		if err != nil {
			return err
		}
		if ref, ok := p.vms.get(regionName, name); ok {
			vms, err := readVMs(ctx, c, ref, "parent")
			if err != nil && !isNotFound(err) {
				return err
			}
			if err == nil && len(vms) == 1 && vms[0].Name == name && vms[0].Parent != nil && *vms[0].Parent == folder.Reference() {
				vm = vms[0]
				return nil
			}
			p.vms.forget(regionName, name)
		}
		ref, err := object.NewSearchIndex(c).FindChild(ctx, folder, name)
		if err != nil {
			return err
		}
		if ref == nil {
			return contract.NotFound(fmt.Errorf("no VM %q in folder %q", name, region.Folder))
		}
		vms, err := readVMs(ctx, c, ref.Reference())
		if err == nil && len(vms) != 1 {
			err = contract.NotFound(fmt.Errorf("no VM %q in folder %q", name, region.Folder))
		}
		if err == nil {
			vm = vms[0]
			p.vms.put(regionName, name, vm.Reference())
		}
		return err
	})
	return vm, err
}

// finder returns a finder scoped to the region's datacenter.
func (p *Provider) finder(ctx context.Context, c *vim25.Client, region Region) (*find.Finder, error) {
	f := find.NewFinder(c, false)
	dc, err := f.Datacenter(ctx, region.Datacenter)
	if err != nil {
		return nil, fmt.Errorf("datacenter %q: %w", region.Datacenter, err)
	}
	f.SetDatacenter(dc)
	return f, nil
}

// parse checks a providerID and that its region is configured.
func (p *Provider) parse(providerID string) (string, string, error) {
	regionName, name, err := ids.Parse(providerID)
	if err != nil {
		return "", "", err
	}
	if _, ok := p.cfg.Regions[regionName]; !ok {
		return "", "", contract.InvalidField("providerID", providerID, "region "+regionName+" is not configured")
	}
	return regionName, name, nil
}

// extra returns a VM's extraConfig as a map.
func extra(vm mo.VirtualMachine) map[string]string {
	out := map[string]string{}
	if vm.Config == nil {
		return out
	}
	for _, o := range vm.Config.ExtraConfig {
		if v := o.GetOptionValue(); v != nil {
			if s, ok := v.Value.(string); ok {
				out[v.Key] = s
			}
		}
	}
	return out
}

// owned says the VM is this Proxy's: marked by any install or release (an
// earlier release wrote "true", a renamed entry another Owner) and with
// its UID. An unmarked VM never is, whatever its name.
func owned(vm mo.VirtualMachine, uid string) bool {
	e := extra(vm)
	return e[markManaged] != "" && e[markUID] == uid
}

func instance(regionName string, vm vmRead) contract.Instance {
	state, ip, msg := stateOf(vm)
	e := extra(vm.VirtualMachine)
	inst := contract.Instance{ProviderID: ids.Format(regionName, vm.Name), Name: vm.Name, State: state, IP: ip, UID: e[markUID], Owner: e[markManaged], Message: msg}
	if vm.Config != nil && vm.Config.CreateDate != nil {
		inst.CreatedAt = *vm.Config.CreateDate
	}
	return inst
}
