package proxmox

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Config is the `proxmox:` block of the providers config (template entry
// 15). Every value pasted into a URL path, a name or a providerID is
// checked against a pattern.
type Config struct {
	// Regions maps Placement.Region to a Proxmox VE cluster.
	Regions map[string]Region `json:"regions"`
	// MachineTypes maps Placement.MachineType to a size.
	MachineTypes map[string]MachineType `json:"machineTypes"`
	// Images maps Placement.Image to a template VM in every region.
	Images map[string]Image `json:"images"`
	// FullClone makes full clones (independent disks on the zone's
	// storage); the default is linked clones of the template's disk, which
	// are fast but need the template's storage on the target node. A
	// zone's own fullClone overrides it.
	FullClone bool `json:"fullClone,omitempty"`
	// CallTimeout bounds each API call; TaskTimeout each task (clone,
	// start, stop, destroy, upload). Defaults 30 s and 10 min.
	CallTimeout contract.Duration `json:"callTimeout,omitempty"`
	TaskTimeout contract.Duration `json:"taskTimeout,omitempty"`
}

// Region is one Proxmox VE cluster: any node's API serves the whole
// cluster.
type Region struct {
	// Endpoint is the API's root URL, https://pve1.example:8006.
	Endpoint string `json:"endpoint"`
	// TokenIDFile and TokenSecretFile are files of the mounted credentials
	// Secret holding the API token's ID (user@realm!name) and secret; read
	// on first use and again whenever they change.
	TokenIDFile     string `json:"tokenIDFile"`
	TokenSecretFile string `json:"tokenSecretFile"`
	// CAFile, when set, is the PEM bundle that signs the API's certificate
	// (the cluster's own CA, /etc/pve/pve-root-ca.pem); otherwise the
	// system roots are used.
	CAFile string `json:"caFile,omitempty"`
	// InsecureSkipTLSVerify accepts any certificate. For labs only.
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`
	// VMIDs is the range the provider allocates VMIDs from; give the
	// operator a range no one else uses. Default 100000–199999.
	VMIDs VMIDRange `json:"vmids,omitempty"`
	// Zones maps Placement.Zone to a node. With a single zone, an empty
	// Placement.Zone selects it.
	Zones map[string]Zone `json:"zones"`
	// Pool, when set, is the resource pool every clone of the region joins
	// (clone's `pool`); a zone's own pool overrides it. The pool must exist.
	Pool string `json:"pool,omitempty"`
}

// VMIDRange is an inclusive range of VMIDs.
type VMIDRange struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// Zone is a node and the storages the provider uses on it.
type Zone struct {
	// Node is the node's name in the cluster.
	Node string `json:"node"`
	// ISOStorage holds the NoCloud seed ISOs; it must allow the "iso"
	// content type on this node.
	ISOStorage string `json:"isoStorage"`
	// Storage receives full clones' disks; unused for linked clones. For
	// a template on another node it must be shared storage (PVE clones
	// across nodes onto shared storage only).
	Storage string `json:"storage,omitempty"`
	// FullClone overrides the config-wide fullClone for this zone.
	FullClone *bool `json:"fullClone,omitempty"`
	// Format is the full clone's disk format (raw, qcow2, vmdk); PVE uses
	// the storage's default when the storage cannot hold it. Full clones
	// only.
	Format string `json:"format,omitempty"`
	// Pool overrides the region's pool for this zone.
	Pool string `json:"pool,omitempty"`
	// Network, when set, is written to the VM's net0; otherwise the
	// template's NIC is kept as it is.
	Network *Network `json:"network,omitempty"`
}

// Network is the VM's first NIC (net0). The clone's model and MAC (PVE
// gives every clone a new MAC) and its other options are kept.
type Network struct {
	// Bridge is the Linux bridge or SDN VNet (vmbr0).
	Bridge string `json:"bridge"`
	// VLAN is the 802.1Q tag (1–4094); unset, net0 carries no tag, also
	// when the template's did.
	VLAN int `json:"vlan,omitempty"`
	// MTU, when set, is the NIC's MTU: 1 takes the bridge's, else
	// 576–65520 (VirtIO only). Unset keeps the template's.
	MTU int `json:"mtu,omitempty"`
	// Firewall, when set, turns PVE's firewall on the NIC on or off;
	// unset keeps the template's.
	Firewall *bool `json:"firewall,omitempty"`
}

// MachineType is a VM size.
type MachineType struct {
	Cores     int `json:"cores"`
	MemoryMiB int `json:"memoryMiB"`
}

// Image names a template VM: by VMID, or by name, looked up in the
// region's cluster per zone: the one on the zone's node, else the
// region's only one, which must then be on shared storage (templates.go).
type Image struct {
	TemplateVMID int    `json:"templateVMID,omitempty"`
	TemplateName string `json:"templateName,omitempty"`
}

const (
	// minVMID and maxVMID are PVE's bounds for a VMID.
	minVMID = 100
	maxVMID = 999999999
)

var (
	// keyRE bounds region and zone keys: they are pasted into providerIDs.
	keyRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$`)
	// nodeRE is PVE's node name (a hostname label).
	nodeRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)
	// storageRE is PVE's storage ID (pve-storage-id).
	// It ends in a letter or digit (pve-common JSONSchema.pm parse_id).
	storageRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9\-_.]{0,98}[A-Za-z0-9]$`)
	// bridgeRE is pve-common's pve-bridge-id format (JSONSchema.pm
	// parse_bridge_id).
	bridgeRE = regexp.MustCompile(`^[-_.\w\d]+$`)
	// poolRE is pve-access-control's pve-poolid format (AccessControl.pm
	// verify_poolname): up to three levels.
	poolRE = regexp.MustCompile(`^[A-Za-z0-9.\-_]+(?:/[A-Za-z0-9.\-_]+){0,2}$`)
	// dnsNameRE is the dns-name format of a VM name.
	dnsNameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)
)

// Validate reports every problem at once, each naming the field and value.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.Regions) == 0 {
		add("regions: at least one is required")
	}
	for _, name := range slices.Sorted(maps.Keys(c.Regions)) {
		r := c.Regions[name]
		at := fmt.Sprintf("regions[%q]", name)
		if !keyRE.MatchString(name) {
			add("%s: a region key must match %s", at, keyRE)
		}
		if u, err := url.Parse(r.Endpoint); err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			add("%s.endpoint %q: want the API root as an https URL such as https://pve1.example:8006", at, r.Endpoint)
		}
		if r.TokenIDFile == "" || r.TokenSecretFile == "" {
			add("%s.tokenIDFile and tokenSecretFile: both are required", at)
		}
		if r.CAFile != "" && r.InsecureSkipTLSVerify {
			add("%s.caFile and insecureSkipTLSVerify: set one, not both", at)
		}
		if v := r.VMIDs; v != (VMIDRange{}) && (v.Min < minVMID || v.Max > maxVMID || v.Max < v.Min) {
			add("%s.vmids %d-%d: want %d <= min <= max <= %d", at, v.Min, v.Max, minVMID, maxVMID)
		}
		if len(r.Zones) == 0 {
			add("%s.zones: at least one is required", at)
		}
		for _, zn := range slices.Sorted(maps.Keys(r.Zones)) {
			z := r.Zones[zn]
			zat := fmt.Sprintf("%s.zones[%q]", at, zn)
			if !keyRE.MatchString(zn) {
				add("%s: a zone key must match %s", zat, keyRE)
			}
			if !nodeRE.MatchString(z.Node) {
				add("%s.node %q: want a node name", zat, z.Node)
			}
			if !storageRE.MatchString(z.ISOStorage) {
				add("%s.isoStorage %q: want a storage ID", zat, z.ISOStorage)
			}
			if z.Storage != "" && !storageRE.MatchString(z.Storage) {
				add("%s.storage %q: want a storage ID", zat, z.Storage)
			}
			full := c.fullClone(z)
			if full && z.Storage == "" {
				add("%s.storage: required with fullClone", zat)
			}
			if z.Format != "" && !slices.Contains(cloneFormats, z.Format) {
				add("%s.format %q: want one of %s", zat, z.Format, strings.Join(cloneFormats, ", "))
			} else if z.Format != "" && !full {
				add("%s.format %q: for full clones only (PVE refuses it for linked clones); set fullClone", zat, z.Format)
			}
			if z.Pool != "" && !poolRE.MatchString(z.Pool) {
				add("%s.pool %q: want a pool ID (up to three levels a/b/c)", zat, z.Pool)
			}
			if n := z.Network; n != nil {
				errs = append(errs, n.validate(zat+".network")...)
			}
		}
		if r.Pool != "" && !poolRE.MatchString(r.Pool) {
			add("%s.pool %q: want a pool ID (up to three levels a/b/c)", at, r.Pool)
		}
	}
	if len(c.MachineTypes) == 0 {
		add("machineTypes: at least one is required")
	}
	for _, name := range slices.Sorted(maps.Keys(c.MachineTypes)) {
		if mt := c.MachineTypes[name]; mt.Cores < 1 || mt.MemoryMiB < 256 {
			add("machineTypes[%q]: cores %d, memoryMiB %d: want at least 1 and 256", name, mt.Cores, mt.MemoryMiB)
		}
	}
	if len(c.Images) == 0 {
		add("images: at least one is required")
	}
	for _, name := range slices.Sorted(maps.Keys(c.Images)) {
		img := c.Images[name]
		switch {
		case (img.TemplateVMID == 0) == (img.TemplateName == ""):
			add("images[%q]: set exactly one of templateVMID and templateName", name)
		case img.TemplateVMID != 0 && (img.TemplateVMID < minVMID || img.TemplateVMID > maxVMID):
			add("images[%q].templateVMID %d: want %d to %d", name, img.TemplateVMID, minVMID, maxVMID)
		case img.TemplateName != "" && !dnsNameRE.MatchString(img.TemplateName):
			add("images[%q].templateName %q: want a VM name (a DNS name)", name, img.TemplateName)
		}
	}
	if c.CallTimeout.Duration < 0 || c.TaskTimeout.Duration < 0 {
		add("callTimeout %s, taskTimeout %s: must not be negative", c.CallTimeout, c.TaskTimeout)
	}
	return errors.Join(errs...)
}

// cloneFormats are the clone's `format` values (qemu-server
// API2/Qemu.pm clone_vm).
var cloneFormats = []string{"raw", "qcow2", "vmdk"}

// fullClone is the clone kind for zone z: its own setting, else the
// config-wide one.
func (c Config) fullClone(z Zone) bool {
	if z.FullClone != nil {
		return *z.FullClone
	}
	return c.FullClone
}

// pool is the pool zone z's clones join: its own, else the region's.
func (r Region) pool(z Zone) string {
	if z.Pool != "" {
		return z.Pool
	}
	return r.Pool
}

func (n Network) validate(at string) []error {
	var errs []error
	if !bridgeRE.MatchString(n.Bridge) {
		errs = append(errs, fmt.Errorf("%s.bridge %q: want a bridge name such as vmbr0", at, n.Bridge))
	}
	if n.VLAN != 0 && (n.VLAN < 1 || n.VLAN > 4094) {
		errs = append(errs, fmt.Errorf("%s.vlan %d: want 1 to 4094", at, n.VLAN))
	}
	if n.MTU != 0 && n.MTU != 1 && (n.MTU < 576 || n.MTU > 65520) {
		errs = append(errs, fmt.Errorf("%s.mtu %d: want 1 (the bridge's) or 576 to 65520", at, n.MTU))
	}
	return errs
}

func (c Config) withDefaults() Config {
	if c.CallTimeout.Duration == 0 {
		c.CallTimeout.Duration = 30 * time.Second
	}
	if c.TaskTimeout.Duration == 0 {
		c.TaskTimeout.Duration = 10 * time.Minute
	}
	regions := make(map[string]Region, len(c.Regions))
	for name, r := range c.Regions {
		if r.VMIDs == (VMIDRange{}) {
			r.VMIDs = VMIDRange{Min: 100000, Max: 199999}
		}
		regions[name] = r
	}
	c.Regions = regions
	return c
}
