package libvirt

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
	"github.com/egress-proxies/egress-proxies-operator/images/fetch"
)

// Config is the `libvirt:` block of the providers config (template entry
// 15). Every value pasted into a name, XML or a providerID is checked
// against a pattern.
type Config struct {
	// Regions maps Placement.Region to one libvirt daemon (a host): several
	// hosts are several regions.
	Regions map[string]Region `json:"regions"`
	// DomainType is the domain's type attribute: "auto" (the default:
	// "kvm" where the host's domain capabilities offer it, else "qemu"),
	// "qemu" (TCG emulation, works everywhere) or "kvm" (hardware
	// virtualisation; the Checker reports a host that does not offer it).
	// Set "qemu" on a host whose /dev/kvm cannot boot a stock guest
	// although libvirt offers it (kvm-pvm: docs/libvirt-provider.md).
	DomainType string `json:"domainType,omitempty"`
	// Machine is the QEMU machine type; default "pc" (i440fx). The seed is
	// an IDE cdrom, which q35 has no bus for.
	Machine string `json:"machine,omitempty"`
	// MachineTypes maps Placement.MachineType to a size.
	MachineTypes map[string]MachineType `json:"machineTypes"`
	// Images maps Placement.Image to a catalogue entry, fetched once per
	// region's pool into a base volume.
	Images map[string]fetch.Entry `json:"images"`
	// AddressSources is the order in which the guest's address is looked
	// for: "lease" (the libvirt network's DHCP leases) and/or "agent" (the
	// QEMU guest agent). Default [lease, agent].
	AddressSources []string `json:"addressSources,omitempty"`
	// SerialLogDir, when set, is a directory on the libvirt host where each
	// domain's serial console is logged as <name>.serial.log (for
	// debugging boots). Empty: the console is a pty only.
	SerialLogDir string `json:"serialLogDir,omitempty"`
	// CallTimeout bounds each libvirt call (default 30 s); ImageTimeout
	// one image fetch into a pool (default 30 min).
	CallTimeout  contract.Duration `json:"callTimeout,omitempty"`
	ImageTimeout contract.Duration `json:"imageTimeout,omitempty"`
	// KeepaliveInterval and KeepaliveCount are each connection's libvirt
	// keepalive (virConnectSetKeepAlive): after KeepaliveInterval without
	// a message from the daemon the client sends a keepalive request, and
	// after KeepaliveCount of them unanswered it closes the connection.
	// A daemon that died silently or is frozen is so detected within
	// about interval × (count + 1), default 5 s × 3 = 15 s, instead of when
	// TCP gives up (minutes), and every call waiting on it fails
	// transient. Whole seconds, 1 s to 10 min; count 1 to 100.
	KeepaliveInterval contract.Duration `json:"keepaliveInterval,omitempty"`
	KeepaliveCount    uint              `json:"keepaliveCount,omitempty"`
}

// Region is one libvirt daemon and where on it the provider works.
type Region struct {
	// URI is the connection URI: qemu:///system,
	// qemu+libssh2://user@host/system?sshauth=privkey&keyfile=…&known_hosts=…
	// (not qemu+libssh://, whose calls hang when several run at once:
	// docs/libvirt-provider.md), qemu+tls://host/system. The credentials are
	// the transport's (socket permissions, SSH key, TLS client certificate);
	// never put a password in the URI.
	URI string `json:"uri"`
	// Pool is the storage pool that holds the base image volumes, the
	// instances' overlays and their seeds. Give the operator a pool of its
	// own: volumes named <instance>.qcow2 and <instance>-seed.iso are
	// taken to be the operator's.
	Pool string `json:"pool"`
	// Network is the libvirt network the instance's NIC joins; its DHCP
	// leases are the "lease" address source.
	Network string `json:"network"`
}

// MachineType is a domain size.
type MachineType struct {
	CPUs      uint `json:"cpus"`
	MemoryMiB uint `json:"memoryMiB"`
	// DiskGiB is the overlay's virtual size; 0 keeps the image's size.
	DiskGiB uint `json:"diskGiB,omitempty"`
}

// The domain types.
const (
	DomainTypeAuto = "auto"
	DomainTypeQEMU = "qemu"
	DomainTypeKVM  = "kvm"
)

var domainTypes = []string{DomainTypeAuto, DomainTypeQEMU, DomainTypeKVM}

// The address sources.
const (
	SourceLease = "lease"
	SourceAgent = "agent"
)

var (
	// keyRE bounds region and image keys: they are pasted into providerIDs
	// and volume names.
	keyRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$`)
	// nameRE bounds pool and network names (libvirt object names).
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	// machineRE bounds the QEMU machine type.
	machineRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	// dirRE bounds the serial log directory: an absolute path.
	dirRE = regexp.MustCompile(`^/[A-Za-z0-9_./-]{0,254}$`)
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
		if !keyRE.MatchString(name) {
			add("regions[%q]: a region key must match %s", name, keyRE)
		}
		if u, err := url.Parse(r.URI); err != nil || u.Scheme == "" {
			shown := r.URI
			if strings.Contains(shown, "@") {
				shown = "<redacted: it may hold a password>"
			}
			add("regions[%q].uri %q: want a libvirt connection URI such as qemu:///system", name, shown)
		} else if _, ok := u.User.Password(); ok {
			add("regions[%q].uri %q: carries a password; use the transport's credentials (SSH key, TLS certificate)", name, redactURI(r.URI))
		}
		if !nameRE.MatchString(r.Pool) {
			add("regions[%q].pool %q: want a storage pool name", name, r.Pool)
		}
		if !nameRE.MatchString(r.Network) {
			add("regions[%q].network %q: want a libvirt network name", name, r.Network)
		}
	}
	if c.DomainType != "" && !slices.Contains(domainTypes, c.DomainType) {
		add("domainType %q: one of %s", c.DomainType, strings.Join(domainTypes, ", "))
	}
	if c.Machine != "" && !machineRE.MatchString(c.Machine) {
		add("machine %q: want a QEMU machine type such as pc", c.Machine)
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
		if !keyRE.MatchString(name) {
			add("images[%q]: an image key must match %s", name, keyRE)
		}
		if err := c.Images[name].Validate(); err != nil {
			add("images[%q].%w", name, err)
		}
	}
	for i, s := range c.AddressSources {
		if s != SourceLease && s != SourceAgent || slices.Index(c.AddressSources, s) != i {
			add("addressSources[%d] %q: each of lease, agent at most once", i, s)
		}
	}
	if c.SerialLogDir != "" && !dirRE.MatchString(c.SerialLogDir) {
		add("serialLogDir %q: want an absolute path", c.SerialLogDir)
	}
	if c.CallTimeout.Duration < 0 || c.ImageTimeout.Duration < 0 {
		add("callTimeout %s, imageTimeout %s: must not be negative", c.CallTimeout, c.ImageTimeout)
	}
	// libvirt takes the interval in whole seconds; 0 leaves the default.
	if ki := c.KeepaliveInterval.Duration; ki != 0 && (ki < time.Second || ki > 10*time.Minute || ki%time.Second != 0) {
		add("keepaliveInterval %s: want whole seconds from 1s to 10m", c.KeepaliveInterval)
	}
	if c.KeepaliveCount > 100 {
		add("keepaliveCount %d: want 1 to 100", c.KeepaliveCount)
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.DomainType == "" {
		c.DomainType = DomainTypeAuto
	}
	if c.KeepaliveInterval.Duration == 0 {
		c.KeepaliveInterval.Duration = 5 * time.Second
	}
	if c.KeepaliveCount == 0 {
		c.KeepaliveCount = 3
	}
	if c.Machine == "" {
		c.Machine = "pc"
	}
	if len(c.AddressSources) == 0 {
		c.AddressSources = []string{SourceLease, SourceAgent}
	}
	if c.CallTimeout.Duration == 0 {
		c.CallTimeout.Duration = 30 * time.Second
	}
	if c.ImageTimeout.Duration == 0 {
		c.ImageTimeout.Duration = 30 * time.Minute
	}
	return c
}

// redactURI hides a URI's password and query (which may name key files)
// for error texts and logs.
func redactURI(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparsable URI>"
	}
	if u.RawQuery != "" {
		u.RawQuery = "REDACTED"
	}
	return u.Redacted()
}
