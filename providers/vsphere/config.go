package vsphere

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Config is the `vsphere:` block of the providers config (template entry
// 15). Every value pasted into a name, an inventory path or a providerID
// is checked against a pattern.
type Config struct {
	// Server is the vCenter (or ESXi) SDK URL, https://vcenter.example/sdk.
	Server string `json:"server"`
	// UsernameFile and PasswordFile are files of the mounted credentials
	// Secret; read on first use and again whenever they change.
	UsernameFile string `json:"usernameFile"`
	PasswordFile string `json:"passwordFile"`
	// CAFile, when set, is the PEM bundle that signs the server's
	// certificate; otherwise the system roots are used.
	CAFile string `json:"caFile,omitempty"`
	// InsecureSkipTLSVerify accepts any server certificate. For labs only.
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`
	// Regions maps Placement.Region to a datacenter.
	Regions map[string]Region `json:"regions"`
	// MachineTypes maps Placement.MachineType to a size.
	MachineTypes map[string]MachineType `json:"machineTypes"`
	// Images maps Placement.Image to a template VM's name in the region's
	// datacenter (found with the finder: a name or an inventory path).
	Images map[string]string `json:"images"`
	// CloneMode is fullClone (the default: the VM's disks are copies, the
	// template may change or go) or linkedClone (the disks are children of
	// a snapshot of the template, which must stay: faster clones, less
	// space), as CAPV's VSphereMachine cloneMode.
	CloneMode string `json:"cloneMode,omitempty"`
	// Snapshot names the template's snapshot a linked clone is made from;
	// empty takes the template's current snapshot. Only with linkedClone.
	Snapshot string `json:"snapshot,omitempty"`
	// CallTimeout bounds each SOAP call; TaskTimeout each task (clone,
	// power on, destroy). Defaults 30 s and 10 min.
	CallTimeout contract.Duration `json:"callTimeout,omitempty"`
	TaskTimeout contract.Duration `json:"taskTimeout,omitempty"`
}

// Region is one datacenter and where in it the provider works.
type Region struct {
	// Datacenter is the datacenter's name.
	Datacenter string `json:"datacenter"`
	// Folder is the VM folder the provider creates in and lists: give the
	// operator a folder of its own.
	Folder string `json:"folder"`
	// Zones maps Placement.Zone to a resource pool, datastore and network.
	// With a single zone, an empty Placement.Zone selects it.
	Zones map[string]Zone `json:"zones"`
}

// Zone is where a VM's compute, disk and network come from.
type Zone struct {
	ResourcePool string `json:"resourcePool"`
	// Host pins the zone's VMs to one ESXi host of the pool's cluster
	// (an inventory path or name). Empty: DRS places them, or, on a
	// cluster without DRS, the provider picks a connected host out of
	// maintenance with the fewest VMs (spec entry 3).
	Host string `json:"host,omitempty"`
	// Datastore is where the VM's disks and files go; DatastoreCluster,
	// instead, a datastore cluster whose storage DRS picks one per clone
	// (StorageResourceManager.RecommendDatastores). Exactly one is set.
	Datastore        string `json:"datastore,omitempty"`
	DatastoreCluster string `json:"datastoreCluster,omitempty"`
	// StoragePolicyID is a storage policy (SPBM profile) ID applied to
	// the VM's home and disks: vCenter places and checks the disks
	// against it. Optional.
	StoragePolicyID string `json:"storagePolicyID,omitempty"`
	// Network is a port group; empty keeps the template's.
	Network string `json:"network,omitempty"`
}

// MachineType is a VM size.
type MachineType struct {
	CPUs      int32 `json:"cpus"`
	MemoryMiB int64 `json:"memoryMiB"`
}

var (
	// keyRE bounds region and zone keys: they are pasted into providerIDs.
	keyRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$`)
	// pathRE bounds inventory names and paths.
	pathRE = regexp.MustCompile(`^[A-Za-z0-9 _.()/-]{1,255}$`)
	// policyRE bounds a storage policy ID: SPBM's IDs are UUIDs, the
	// built-in ones as well.
	policyRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
)

// The clone modes, CAPV's names.
const (
	fullClone   = "fullClone"
	linkedClone = "linkedClone"
)

// Validate reports every problem at once, each naming the field and value.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if u, err := url.Parse(c.Server); err != nil || u.Scheme != "https" || u.Host == "" {
		add("server %q: want an https URL such as https://vcenter.example/sdk", c.Server)
	}
	if c.UsernameFile == "" || c.PasswordFile == "" {
		add("usernameFile and passwordFile: both are required")
	}
	if c.CAFile != "" && c.InsecureSkipTLSVerify {
		add("caFile and insecureSkipTLSVerify: set one, not both")
	}
	if len(c.Regions) == 0 {
		add("regions: at least one is required")
	}
	for _, name := range slices.Sorted(maps.Keys(c.Regions)) {
		r := c.Regions[name]
		if !keyRE.MatchString(name) {
			add("regions[%q]: a region key must match %s", name, keyRE)
		}
		if !pathRE.MatchString(r.Datacenter) {
			add("regions[%q].datacenter %q: want an inventory name", name, r.Datacenter)
		}
		if !pathRE.MatchString(r.Folder) {
			add("regions[%q].folder %q: want a VM folder path", name, r.Folder)
		}
		if len(r.Zones) == 0 {
			add("regions[%q].zones: at least one is required", name)
		}
		for _, zn := range slices.Sorted(maps.Keys(r.Zones)) {
			z := r.Zones[zn]
			if !keyRE.MatchString(zn) {
				add("regions[%q].zones[%q]: a zone key must match %s", name, zn, keyRE)
			}
			for _, f := range []struct {
				field, value string
				required     bool
			}{{"resourcePool", z.ResourcePool, true}, {"datastore", z.Datastore, false}, {"datastoreCluster", z.DatastoreCluster, false}, {"network", z.Network, false}, {"host", z.Host, false}} {
				if (f.required || f.value != "") && !pathRE.MatchString(f.value) {
					add("%s %q: want an inventory name or path", zoneField(name, zn, f.field), f.value)
				}
			}
			if (z.Datastore == "") == (z.DatastoreCluster == "") {
				add("%s %q and %s %q: set exactly one", zoneField(name, zn, "datastore"), z.Datastore, zoneField(name, zn, "datastoreCluster"), z.DatastoreCluster)
			}
			if z.StoragePolicyID != "" && !policyRE.MatchString(z.StoragePolicyID) {
				add("%s %q: want a storage policy ID (a UUID such as aa6d5a82-1c88-45da-85d3-3d74b91a5bad)", zoneField(name, zn, "storagePolicyID"), z.StoragePolicyID)
			}
		}
	}
	if len(c.MachineTypes) == 0 {
		add("machineTypes: at least one is required")
	}
	for _, name := range slices.Sorted(maps.Keys(c.MachineTypes)) {
		if mt := c.MachineTypes[name]; mt.CPUs < 1 || mt.MemoryMiB < 256 {
			add("machineTypes[%q]: cpus %d, memoryMiB %d: want at least 1 and 256", name, mt.CPUs, mt.MemoryMiB)
		}
	}
	if len(c.Images) == 0 {
		add("images: at least one is required")
	}
	for _, name := range slices.Sorted(maps.Keys(c.Images)) {
		if !pathRE.MatchString(c.Images[name]) {
			add("images[%q] %q: want a template VM's name or path", name, c.Images[name])
		}
	}
	switch c.CloneMode {
	case "", fullClone:
		if c.Snapshot != "" {
			add("snapshot %q: only with cloneMode %s", c.Snapshot, linkedClone)
		}
	case linkedClone:
		if c.Snapshot != "" && !pathRE.MatchString(c.Snapshot) {
			add("snapshot %q: want a snapshot name or path", c.Snapshot)
		}
	default:
		add("cloneMode %q: want %s or %s", c.CloneMode, fullClone, linkedClone)
	}
	if c.CallTimeout.Duration < 0 || c.TaskTimeout.Duration < 0 {
		add("callTimeout %s, taskTimeout %s: must not be negative", c.CallTimeout, c.TaskTimeout)
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.CallTimeout.Duration == 0 {
		c.CallTimeout.Duration = 30 * time.Second
	}
	if c.TaskTimeout.Duration == 0 {
		c.TaskTimeout.Duration = 10 * time.Minute
	}
	return c
}
