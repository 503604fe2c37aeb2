// Package proxmox is the egress-proxies provider for Proxmox VE, on
// github.com/luthermonson/go-proxmox: it clones proxy VMs from a template,
// hands them cloud-init on a NoCloud seed ISO uploaded to a configured ISO
// storage, marks them with PVE tags and reads their address from the QEMU
// guest agent. docs/proxmox-provider-spec.md gives every decision and its
// reason; docs/proxmox-provider.md is the guide. Package pvefake is the
// fake PVE API its tests run against.
package proxmox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	pve "github.com/luthermonson/go-proxmox"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/images/nocloud"
)

// Type is the provider's type in the providers config.
const Type = "proxmox"

// MaxCloudInit bounds CloudInit: the NoCloud seed's limit.
const MaxCloudInit = nocloud.MaxUserData

// maxCloneAttempts bounds how many VMIDs one Create tries when racing
// clones take the ones it picked.
const maxCloneAttempts = 8

// ids: <region>/<vmid> (VMIDs are unique in a cluster; a VM may move
// between its nodes, so the node is not part of the ID).
var ids = contract.IDFormat{Location: keyRE, Key: regexp.MustCompile(`^[1-9][0-9]{2,8}$`)}

// Provider is the Proxmox VE provider. It is safe for concurrent use.
type Provider struct {
	cfg     Config
	regions map[string]*regionClient

	mu sync.Mutex
	// nodes remembers which node each VM was last seen on, so Get needs
	// no cluster-wide list; a miss or a stale entry falls back to it.
	nodes map[string]string
	// tagLevels is how many of the marks each region's tag access lets
	// the provider write as tags (tagaccess.go), learned from refusals.
	tagLevels map[string]int
}

var (
	_ contract.Provider = (*Provider)(nil)
	_ contract.Checker  = (*Provider)(nil)
)

// New validates cfg and returns a provider. It does not dial or read the
// credential files (contract §7).
func New(cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("proxmox provider config: %w", err)
	}
	cfg = cfg.withDefaults()
	p := &Provider{cfg: cfg, regions: map[string]*regionClient{}, nodes: map[string]string{}, tagLevels: map[string]int{}}
	for name, r := range cfg.Regions {
		p.regions[name] = newRegionClient(name, r)
	}
	return p, nil
}

// plan is a validated request resolved against the catalogues.
type plan struct {
	region   string
	zoneKey  string
	zone     Zone
	machine  MachineType
	imageKey string
	image    Image
}

// plan validates req before any call (contract §1.2).
func (p *Provider) plan(req contract.CreateRequest) (plan, error) {
	if err := req.Validate(); err != nil {
		return plan{}, err
	}
	pl := req.Placement
	region, machine, image, err := contract.LookupPlacement(pl, p.cfg.Regions, p.cfg.MachineTypes, p.cfg.Images)
	if err != nil {
		return plan{}, err
	}
	zone, err := contract.LookupZone(region.Zones, pl.Zone)
	if err != nil {
		return plan{}, err
	}
	if err := contract.CloudInitFits(req.CloudInit, MaxCloudInit, "a NoCloud seed"); err != nil {
		return plan{}, err
	}
	zoneKey := pl.Zone
	for k, z := range region.Zones {
		if zoneKey == "" && z == zone {
			zoneKey = k
		}
	}
	return plan{region: pl.Region, zoneKey: zoneKey, zone: zone, machine: machine, imageKey: pl.Image, image: image}, nil
}

// Create clones the VM, marks it, delivers its seed and starts it
// (create-return: blocking, each task within the task timeout). Every step
// finds what an earlier, cut-off attempt did (template entry 10):
//  1. find a VM of this name in the region whose marks carry this UID,
//     managed by any owner (the previous release's too) → resume it;
//  2. clone the template to a VMID derived from the UID (allocated-id,
//     allocate-then-verify): taken → the next; a nameless clone in
//     progress where this Proxy's VMID would be → busy (transient);
//  3. upload the seed and write cores, memory, cdrom and tags, unless done;
//  4. write the started mark and start, unless running.
func (p *Provider) Create(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
	pl, err := p.plan(req)
	if err != nil {
		return contract.Instance{}, err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues(contract.LogKeyInstance, req.Name)
	ctx = logr.NewContext(ctx, log)

	vms, err := p.resources(ctx, pl.region)
	if err != nil {
		return contract.Instance{}, err
	}
	v, found, err := p.findOwn(ctx, pl.region, req, vms)
	if err != nil {
		return contract.Instance{}, err
	}
	if !found {
		if v, err = p.cloneNew(ctx, pl, req, vms); err != nil {
			return contract.Instance{}, err
		}
		log.V(contract.LogOutcome).Info("cloned instance", "vmid", v.vmid, "node", v.node)
	}
	if l := v.lock(); l == "clone" || l == "create" || l == "destroyed" {
		return contract.Instance{}, fmt.Errorf("VM %d is locked (%s); retrying", v.vmid, l)
	}
	if err := p.prepare(ctx, pl, req, &v); err != nil {
		return contract.Instance{}, err
	}
	if v.status.Status != "running" {
		if err := p.start(ctx, v); err != nil {
			return contract.Instance{}, err
		}
		log.V(contract.LogStep).Info("started instance", "vmid", v.vmid)
		v.status.Status, v.status.QMPStatus, v.marks.started = "running", "running", true
	}
	return p.instance(v, ""), nil
}

// findOwn finds this Proxy's VM by name and marks among the region's VMs;
// VMs of the same name without this UID are ignored, never adopted.
func (p *Provider) findOwn(ctx context.Context, region string, req contract.CreateRequest, vms pve.ClusterResources) (vmInfo, bool, error) {
	for _, r := range vms {
		if !isVM(r) || r.Name != req.Name || r.Template == 1 {
			continue
		}
		v, err := p.readVM(ctx, region, r.Node, int(r.VMID))
		if isNotFoundErr(err) {
			continue
		}
		if err != nil {
			return vmInfo{}, false, err
		}
		// Any owner: the previous release's VMs carry the legacy one.
		if v.marks.managed() && v.marks.uid == req.UID {
			p.remember(region, v.vmid, v.node)
			return v, true, nil
		}
		logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("ignoring a VM of the same name without this Proxy's marks", "vmid", v.vmid)
	}
	return vmInfo{}, false, nil
}

// cloneNew clones the template to a free VMID of the region's range,
// starting at one derived from the UID, and waits for the clone.
func (p *Provider) cloneNew(ctx context.Context, pl plan, req contract.CreateRequest, vms pve.ClusterResources) (vmInfo, error) {
	tmpl, err := p.template(ctx, pl.region, pl.zoneKey, pl.imageKey, pl.image, vms)
	if err != nil {
		return vmInfo{}, err
	}
	used := map[int]*pve.ClusterResource{}
	for _, r := range vms {
		if r != nil {
			used[int(r.VMID)] = r
		}
	}
	rng := p.cfg.Regions[pl.region].VMIDs
	size := rng.Max - rng.Min + 1
	first := firstVMID(req.UID, rng)
	created := time.Now().UTC().Truncate(time.Second)
	attempts := 0
	for i := 0; i < size && attempts < maxCloneAttempts; i++ {
		vmid := rng.Min + (first-rng.Min+i)%size
		if r, ok := used[vmid]; ok {
			if isVM(r) && (nameless(r.Name, vmid) || r.Name == req.Name) {
				// The list's names come from pvestatd and lag, and a clone
				// in progress has none ("VM <vmid>" once pvestatd saw it):
				// read the config before passing by what may be this
				// Proxy's earlier attempt.
				v, mine, err := p.claimed(ctx, pl.region, r.Node, vmid, req.UID)
				if err != nil || mine {
					return v, err
				}
			}
			continue
		}
		attempts++
		var upid pve.UPID
		err := p.callWithin(ctx, pl.region, "CloneVM", p.cfg.TaskTimeout.Duration, func(ctx context.Context, c conn) error {
			_, task, err := newVM(c.api, tmpl.node, tmpl.vmid).Clone(ctx, p.cloneOptions(pl, tmpl, vmid, req.Name, description(req.Owner, req.UID, created)))
			if task != nil {
				upid = task.UPID
			}
			return err
		})
		if isLocalClone(err) {
			return vmInfo{}, contract.Permanentf("image %s: template %d is on node %s and uses storage that is not shared, so PVE cannot clone it to node %s (zone %s): give that zone an image whose template is on %s, or move the template's disks (and any CD-ROM image) to shared storage: %w",
				imageName(pl.image), tmpl.vmid, tmpl.node, pl.zone.Node, cmp.Or(req.Placement.Zone, "default"), pl.zone.Node, err)
		}
		if isVMIDTaken(err) {
			// Another clone took it between the list and now.
			node := pl.zone.Node
			if n, err := p.locate(ctx, pl.region, vmid); err == nil {
				node = n
			}
			v, mine, err := p.claimed(ctx, pl.region, node, vmid, req.UID)
			if err != nil || mine {
				return v, err
			}
			continue
		}
		if err != nil {
			return vmInfo{}, err
		}
		// The clone's config stays on the template's node until the clone
		// is done; then it moves to the target (qemu-server clone_vm).
		p.remember(pl.region, vmid, tmpl.node)
		if err := p.waitTask(ctx, pl.region, upid, fmt.Sprintf("clone of template %d to VM %d", tmpl.vmid, vmid)); err != nil {
			if isVMIDTaken(err) {
				// Another node had the VMID: pmxcfs refused the clone's
				// temporary config, nothing was made. Go on with the next.
				p.forget(pl.region, vmid)
				continue
			}
			return vmInfo{}, err
		}
		p.remember(pl.region, vmid, pl.zone.Node)
		return p.readVM(ctx, pl.region, pl.zone.Node, vmid)
	}
	return vmInfo{}, contract.Quota(fmt.Errorf("no free VMID in %d-%d of region %s after %d attempts", rng.Min, rng.Max, pl.region, attempts))
}

// cloneOptions are the clone's parameters for the zone (qemu-server
// API2/Qemu.pm clone_vm): linked or full (full copies go to the zone's
// storage, in its format when set), the pool, and the zone's node as the
// target when the template is on another node.
func (p *Provider) cloneOptions(pl plan, tmpl templateRef, vmid int, name, desc string) *pve.VirtualMachineCloneOptions {
	full := p.cfg.fullClone(pl.zone)
	opts := &pve.VirtualMachineCloneOptions{NewID: vmid, Name: name, Description: desc, Full: pve.IntOrBool(full),
		Pool: p.cfg.Regions[pl.region].pool(pl.zone), Target: tmpl.target}
	if full {
		opts.Storage, opts.Format = pl.zone.Storage, pl.zone.Format
	}
	return opts
}

// claimed reads a used VMID on the walk: this Proxy's VM (mine: resume
// it), a clone still in progress (its config is only `lock: clone`, so it
// may be this Proxy's earlier attempt: a transient "busy" error rather
// than a second clone), or someone else's (pass by).
func (p *Provider) claimed(ctx context.Context, region, node string, vmid int, uid string) (vmInfo, bool, error) {
	v, err := p.readVM(ctx, region, node, vmid)
	switch {
	case isNotFoundErr(err):
		return vmInfo{}, false, nil
	case err != nil:
		return vmInfo{}, false, err
	case v.marks.managed() && v.marks.uid == uid:
		p.remember(region, vmid, node)
		return v, true, nil
	case v.lock() == "clone" && nameless(v.name(), vmid):
		return vmInfo{}, false, fmt.Errorf("VM %d is being cloned and may be this Proxy's earlier attempt; retrying once the clone ends", vmid)
	}
	return vmInfo{}, false, nil
}

// nameless reports whether name is what PVE reports for a VM whose config
// has no name, such as a clone whose temporary config holds only `lock:
// clone` (qemu-server clone_vm): "VM <vmid>" from status/current and from
// /cluster/resources once pvestatd saw the VMID (qemu-server QemuServer.pm
// vmstatus), nothing in the list before that (pve-manager API2Tools.pm
// extract_vm_stats).
func nameless(name string, vmid int) bool { return name == "" || name == "VM "+strconv.Itoa(vmid) }

// firstVMID derives the first VMID to try from the UID, so concurrent
// Creates for different Proxies start at different places in the range.
func firstVMID(uid string, rng VMIDRange) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(uid))
	return rng.Min + int(h.Sum32()%uint32(rng.Max-rng.Min+1))
}

// prepare delivers the seed and writes the size, cdrom, the zone's
// network and the tags, unless an earlier attempt did (step 3).
func (p *Provider) prepare(ctx context.Context, pl plan, req contract.CreateRequest, v *vmInfo) error {
	volid := seedVolid(pl.zone, v.vmid, req.Name)
	cdrom := volid + ",media=cdrom"
	// The PUT below writes ide2 with the rest at once: a cdrom on this
	// seed says it was done, whatever tags the cluster allowed.
	if v.confString("ide2") == cdrom && v.marks.uid == req.UID {
		return nil
	}
	var networkConfig []byte
	if n := req.Network; n != nil {
		// The guest's cloud-init applies it to the NIC of this MAC: the
		// clone's own (clone_vm draws a new one), which the write below
		// keeps.
		mac, ok := macOf(v.confString("net0"))
		if !ok {
			return contract.Permanentf("VM %d has no net0 with a MAC address (net0 %q): the image's template needs a NIC for the static address %s", v.vmid, v.confString("net0"), n.Address)
		}
		var err error
		if networkConfig, err = nocloud.NetworkConfig(*n, mac); err != nil {
			return err
		}
	}
	if err := p.uploadSeed(ctx, pl, req.Name, v.vmid, req.CloudInit, networkConfig); err != nil {
		return err
	}
	logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("uploaded seed", "volid", volid)
	created := v.marks.createdAt
	if created.IsZero() {
		created = time.Now()
	}
	opts := []pve.VirtualMachineOption{
		{Name: "cores", Value: pl.machine.Cores},
		{Name: "memory", Value: strconv.Itoa(pl.machine.MemoryMiB)},
		{Name: "ide2", Value: cdrom},
		{Name: "agent", Value: "1"},
	}
	if n := pl.zone.Network; n != nil {
		// In the same write as the marks: a VM marked done has its network.
		opts = append(opts, pve.VirtualMachineOption{Name: "net0", Value: n.net0(v.confString("net0"))})
	}
	// The static address's record, in the same write: a VM whose cdrom is
	// this seed has it (address.go).
	opts = append(opts, addressOptions(req.Network, v.confString)...)
	tags, err := p.configure(ctx, *v, "ConfigureVM", opts, ourTags(v.marks.owner, req.UID, created)...)
	if err != nil {
		return err
	}
	v.conf["tags"], v.conf["ide2"] = tags, cdrom
	v.marks = readMarks(tags, v.confString("description"))
	logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("configured instance", "vmid", v.vmid)
	return nil
}

// start writes the started mark — into the description, and as a tag
// where the cluster allows it — then starts the VM (step 4).
func (p *Provider) start(ctx context.Context, v vmInfo) error {
	if !v.marks.started {
		desc := withStarted(v.confString("description"))
		if _, err := p.configure(ctx, v, "MarkStarted", []pve.VirtualMachineOption{{Name: "description", Value: desc}}, tagStarted); err != nil {
			return err
		}
	}
	var upid pve.UPID
	err := p.call(ctx, v.region, "StartVM", func(ctx context.Context, c conn) error {
		task, err := newVM(c.api, v.node, v.vmid).Start(ctx)
		if task != nil {
			upid = task.UPID
		}
		return err
	})
	if err != nil {
		return err
	}
	return p.waitTask(ctx, v.region, upid, fmt.Sprintf("start of VM %d", v.vmid))
}

// Get reads the VM: status, config and, when it runs, the guest agent's
// addresses.
func (p *Provider) Get(ctx context.Context, providerID string) (contract.Instance, error) {
	region, vmid, err := p.parse(providerID)
	if err != nil {
		return contract.Instance{}, err
	}
	ctx = logr.NewContext(ctx, logr.FromContextOrDiscard(ctx).WithValues(contract.LogKeyInstance, providerID))
	v, err := p.lookup(ctx, region, vmid)
	if isNodeUnreachable(err) {
		return p.onUnreachableNode(ctx, region, vmid, err)
	}
	if err != nil {
		return contract.Instance{}, err
	}
	if !v.marks.managed() && v.lock() != "destroyed" {
		return contract.Instance{}, contract.NotFound(fmt.Errorf("VM %d in region %s carries no egress-proxies marks: not this operator's", vmid, region))
	}
	ip, message := "", ""
	if v.status.Status == "running" && (v.status.QMPStatus == "" || v.status.QMPStatus == "running") && v.lock() == "" {
		reported, err := p.agentIPs(ctx, v)
		if err != nil {
			return contract.Instance{}, err
		}
		// A static address (ipconfig0, read with the config): Running
		// only once the guest reports exactly it (contract §2.2).
		ip, message = atAddress(requestedIP(v.confString("ipconfig0")), reported)
	}
	inst := p.instance(v, ip)
	if inst.Message == "" {
		inst.Message = message
	}
	return inst, nil
}

// lookup finds the VM's node (remembered, else from the cluster list) and
// reads it. The node's own answer is trusted over the list, which lags.
func (p *Provider) lookup(ctx context.Context, region string, vmid int) (vmInfo, error) {
	if node, ok := p.remembered(region, vmid); ok {
		v, err := p.readVM(ctx, region, node, vmid)
		if !isNotFoundErr(err) {
			return v, err
		}
		p.forget(region, vmid)
		node2, err2 := p.locate(ctx, region, vmid)
		if err2 != nil || node2 == node {
			if err2 != nil && !isNotFoundErr(err2) {
				return vmInfo{}, err2
			}
			return vmInfo{}, err
		}
		return p.readRemember(ctx, region, node2, vmid)
	}
	node, err := p.locate(ctx, region, vmid)
	if err != nil {
		return vmInfo{}, err
	}
	return p.readRemember(ctx, region, node, vmid)
}

func (p *Provider) readRemember(ctx context.Context, region, node string, vmid int) (vmInfo, error) {
	v, err := p.readVM(ctx, region, node, vmid)
	if err == nil {
		p.remember(region, vmid, node)
	}
	return v, err
}

// locate finds a VM's node in the cluster list (not-found: list-and-miss).
func (p *Provider) locate(ctx context.Context, region string, vmid int) (string, error) {
	vms, err := p.resources(ctx, region)
	if err != nil {
		return "", err
	}
	for _, r := range vms {
		if isVM(r) && int(r.VMID) == vmid {
			return r.Node, nil
		}
	}
	return "", contract.NotFound(fmt.Errorf("no VM %d in region %s", vmid, region))
}

// Delete stops the VM, destroys it with its disks and deletes its seed
// (delete-return: waits, secondary-resources: explicit). A VM already gone,
// already being destroyed or not this operator's is success; its seed is
// deleted all the same.
func (p *Provider) Delete(ctx context.Context, providerID string) error {
	region, vmid, err := ids.Parse(providerID)
	if err != nil {
		return err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues(contract.LogKeyInstance, providerID)
	if _, ok := p.cfg.Regions[region]; !ok {
		log.Info("region is no longer configured; nothing to delete", "region", region)
		return nil
	}
	ctx = logr.NewContext(ctx, log)
	id, _ := strconv.Atoi(vmid)
	v, err := p.lookup(ctx, region, id)
	switch {
	case isNotFoundErr(err):
		log.V(contract.LogOutcome).Info("instance is gone")
		return p.deleteSeeds(ctx, region, id)
	case isNodeUnreachable(err):
		node, lerr := p.locate(ctx, region, id)
		if lerr != nil {
			return errors.Join(err, lerr)
		}
		return nodeUnreachable(node, err)
	case err != nil:
		return err
	case v.lock() == "destroyed":
		log.V(contract.LogStep).Info("instance is already being destroyed")
		return p.deleteSeedsOn(ctx, region, id, v.node)
	case !v.marks.managed():
		log.Info("VM carries no egress-proxies marks; not deleting it", "vmid", id)
		return nil
	}
	if v.status.Status == "running" {
		if err := p.stop(ctx, v); err != nil {
			return p.deleteRaced(ctx, region, id, err)
		}
	}
	var upid pve.UPID
	err = p.call(ctx, region, "DestroyVM", func(ctx context.Context, c conn) error {
		task, err := newVM(c.api, v.node, v.vmid).Delete(ctx, &pve.VirtualMachineDeleteOptions{Purge: true})
		if task != nil {
			upid = task.UPID
		}
		return err
	})
	if err == nil {
		err = p.waitTask(ctx, region, upid, fmt.Sprintf("destroy of VM %d", id))
	}
	if err != nil && !isNotFoundErr(err) {
		return p.deleteRaced(ctx, region, id, err)
	}
	p.forget(region, id)
	log.V(contract.LogOutcome).Info("destroyed instance", "vmid", id)
	return p.deleteSeedsOn(ctx, region, id, v.node)
}

// deleteRaced decides a Delete whose stop or destroy failed with err: if
// another Delete got there first — the VM is gone ("does not exist") or
// being destroyed ("VM is locked (destroyed)") — this one is done once the
// seeds are gone; otherwise err stands.
func (p *Provider) deleteRaced(ctx context.Context, region string, vmid int, err error) error {
	v, again := p.lookup(ctx, region, vmid)
	switch {
	case isNotFoundErr(again):
		logr.FromContextOrDiscard(ctx).V(contract.LogOutcome).Info("instance is gone")
	case again == nil && v.lock() == "destroyed":
		logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("instance is already being destroyed")
	default:
		return err
	}
	p.forget(region, vmid)
	return p.deleteSeeds(ctx, region, vmid)
}

// stop powers the VM off (a hard stop: the VM is destroyed next).
func (p *Provider) stop(ctx context.Context, v vmInfo) error {
	var upid pve.UPID
	err := p.call(ctx, v.region, "StopVM", func(ctx context.Context, c conn) error {
		task, err := newVM(c.api, v.node, v.vmid).Stop(ctx)
		if task != nil {
			upid = task.UPID
		}
		return err
	})
	if err != nil {
		return err
	}
	return p.waitTask(ctx, v.region, upid, fmt.Sprintf("stop of VM %d", v.vmid))
}

// deleteSeedsOn deletes the VM's seeds from the ISO storage of the zones
// on node, the node it ran on: its seed was uploaded there (Create writes
// it to its zone's node). Other nodes are not asked: one of them down must
// not fail this Delete.
func (p *Provider) deleteSeedsOn(ctx context.Context, region string, vmid int, node string) error {
	zones := p.cfg.Regions[region].Zones
	for _, zn := range slices.Sorted(maps.Keys(zones)) {
		if zones[zn].Node != node {
			continue
		}
		if err := p.deleteVolumes(ctx, region, zones[zn], isSeedOf(vmid)); err != nil {
			return err
		}
	}
	logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("deleted seeds", "vmid", vmid, "node", node)
	return nil
}

// deleteSeeds deletes the VM's seeds when its node is not known (the VM
// was gone before this Delete read it): from every zone's ISO storage of
// the region. A node that cannot be reached (pveproxy's 595) is passed
// by, logged: a seed of the VM there (seed-<vmid>-<name>.iso, a few
// hundred KiB) stays until deleted by hand, or replaced by a later Create
// of the same name on that VMID; an unreachable node must not hold every
// Delete of the region.
func (p *Provider) deleteSeeds(ctx context.Context, region string, vmid int) error {
	log := logr.FromContextOrDiscard(ctx)
	zones := p.cfg.Regions[region].Zones
	for _, zn := range slices.Sorted(maps.Keys(zones)) {
		err := p.deleteVolumes(ctx, region, zones[zn], isSeedOf(vmid))
		if isNodeUnreachable(err) {
			log.Info("node unreachable: its seeds of this VM, if any, stay until it is back", "vmid", vmid, "node", zones[zn].Node, "error", err.Error())
			continue
		}
		if err != nil {
			return err
		}
	}
	log.V(contract.LogStep).Info("deleted seeds", "vmid", vmid)
	return nil
}

// ListByTag lists each region's VMs in one call and keeps those whose tags
// carry the mark with exactly this value (list-partial: fail-whole): an
// Owner is its owner tag, LegacyManagedValue the managed tag without one. PVE cannot filter by tag on
// the server. The state comes from the list (no guest agent call per VM):
// a running VM is Provisioning here; Get reports Running with its address.
//
// A VM of the region's VMID range without the managed tag may be in the
// mark window (entry 8): cloned, its marks in the description only, by a
// Create cut off before the tag write. Its config is read, so the garbage
// collector sees it too; outside the window the range holds none — unless
// the cluster's tag access refuses the tags (tagaccess.go), when every VM
// whose tags lack the per-Proxy marks is read (listedMarks).
func (p *Provider) ListByTag(ctx context.Context, key, value string) ([]contract.Instance, error) {
	var matches func(marks) bool
	switch key {
	case contract.LabelManaged:
		matches = func(m marks) bool { return m.owner == value }
	case contract.LabelUID:
		matches = func(m marks) bool { return m.uid == value }
	default:
		return nil, contract.InvalidField("key", key, "one of "+contract.LabelManaged+", "+contract.LabelUID)
	}
	if value == "" {
		return nil, nil
	}
	var out []contract.Instance
	for _, region := range slices.Sorted(maps.Keys(p.cfg.Regions)) {
		vms, err := p.resources(ctx, region)
		if err != nil {
			return nil, err
		}
		owner := ""
		if key == contract.LabelManaged {
			owner = value
		}
		for _, r := range vms {
			if !isVM(r) || r.Template == 1 {
				continue
			}
			v, found, err := p.listedMarks(ctx, region, r, owner)
			if err != nil {
				return nil, err
			}
			if !found || !matches(v.marks) {
				continue
			}
			p.remember(region, v.vmid, v.node)
			out = append(out, p.instance(v, ""))
		}
	}
	return out, nil
}

// inMarkWindow reads an untagged VM of the range: found when its
// description carries the marks. A VM gone meanwhile is not found.
func (p *Provider) inMarkWindow(ctx context.Context, region string, r *pve.ClusterResource) (vmInfo, bool, error) {
	v, err := p.readVM(ctx, region, r.Node, int(r.VMID))
	switch {
	case isNotFoundErr(err):
		return vmInfo{}, false, nil
	case err != nil:
		return vmInfo{}, false, err
	case !v.marks.managed() || v.marks.uid == "" || v.lock() == "destroyed":
		return vmInfo{}, false, nil
	}
	p.remember(region, v.vmid, v.node)
	return v, true, nil
}

func (p *Provider) instance(v vmInfo, ip string) contract.Instance {
	state := v.state(ip)
	inst := contract.Instance{ProviderID: ids.Format(v.region, strconv.Itoa(v.vmid)), Name: v.name(), State: state,
		UID: v.marks.uid, Owner: v.marks.owner, CreatedAt: v.marks.createdAt}
	if state == contract.StateRunning {
		inst.IP = ip
	}
	if l := v.lock(); l != "" && l != "destroyed" {
		inst.Message = "locked (" + l + ")"
	}
	return inst
}

// parse checks a providerID and that its region is configured.
func (p *Provider) parse(providerID string) (string, int, error) {
	region, vmid, err := ids.Parse(providerID)
	if err != nil {
		return "", 0, err
	}
	if _, ok := p.cfg.Regions[region]; !ok {
		return "", 0, contract.InvalidField("providerID", providerID, "region "+region+" is not configured")
	}
	id, _ := strconv.Atoi(vmid)
	return region, id, nil
}

func (p *Provider) remember(region string, vmid int, node string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nodes[region+"/"+strconv.Itoa(vmid)] = node
}

func (p *Provider) remembered(region string, vmid int) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, ok := p.nodes[region+"/"+strconv.Itoa(vmid)]
	return n, ok
}

func (p *Provider) forget(region string, vmid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.nodes, region+"/"+strconv.Itoa(vmid))
}

func isNotFoundErr(err error) bool { return errors.Is(err, contract.ErrNotFound) }
