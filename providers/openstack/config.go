package openstack

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Config is the `openstack:` block of the providers config (template
// entry 15). Every value pasted into a name, a request or a providerID is
// checked against a pattern.
type Config struct {
	// CloudsFile is a clouds.yaml file of the mounted credentials Secret:
	// auth_url and an application credential (preferred) or a user's
	// password and project. Read on first use and again whenever it
	// changes. Its region_name, interface, cacert and verify are not used:
	// regions, interface and TLS come from this config.
	CloudsFile string `json:"cloudsFile"`
	// Cloud is the entry of clouds.yaml to use. Default "openstack".
	Cloud string `json:"cloud,omitempty"`
	// Interface is the catalogue's endpoint interface: public (default),
	// internal or admin.
	Interface string `json:"interface,omitempty"`
	// CAFile, when set, is the PEM bundle that signs the endpoints'
	// certificates; otherwise the system roots are used.
	CAFile string `json:"caFile,omitempty"`
	// InsecureSkipTLSVerify accepts any certificate. For labs only.
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`
	// Regions maps Placement.Region to an OpenStack region.
	Regions map[string]Region `json:"regions"`
	// MachineTypes maps Placement.MachineType to a Nova flavor's name.
	MachineTypes map[string]string `json:"machineTypes"`
	// Images maps Placement.Image to a Glance image's name or ID; a name
	// must match exactly one image of the region.
	Images map[string]string `json:"images"`
	// CallTimeout bounds each API call (and a Keystone login). Default 30 s.
	CallTimeout contract.Duration `json:"callTimeout,omitempty"`
	// CreateTimeout bounds the server create (POST /servers), which Nova
	// answers only once it has checked the quota, the flavor, the image
	// and the network and recorded the build: slower than a read on a busy
	// cloud. Default 2 min.
	CreateTimeout contract.Duration `json:"createTimeout,omitempty"`
}

// Region is one OpenStack region and how servers are placed in it.
type Region struct {
	// Name is the region's name in the catalogue (RegionOne).
	Name string `json:"name"`
	// Zones maps Placement.Zone to an availability zone. With a single
	// zone, an empty Placement.Zone selects it.
	Zones map[string]string `json:"zones"`
	// Network is the ID of the Neutron network servers are attached to.
	Network string `json:"network"`
	// SecurityGroups are the names of the groups servers get; one of them
	// must allow the proxy's port from the allowed clients, unless
	// ManagedSecurityGroup opens it. Default: Nova's "default" group (none
	// beside a managed group).
	SecurityGroups []string `json:"securityGroups,omitempty"`
	// ConfigDrive, ManagedSecurityGroup and ServerGroupPolicy are the
	// options of options.go.
	ConfigDrive          bool                  `json:"configDrive,omitempty"`
	ManagedSecurityGroup *ManagedSecurityGroup `json:"managedSecurityGroup,omitempty"`
	ServerGroupPolicy    string                `json:"serverGroupPolicy,omitempty"`
	// FloatingIPs, when set, gives each replica of a Proxy a floating IP
	// of its own, the address the world sees (floatingips.go).
	FloatingIPs *FloatingIPs `json:"floatingIPs,omitempty"`
}

var (
	// keyRE bounds region and zone keys: they are pasted into providerIDs.
	keyRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$`)
	// nameRE bounds OpenStack names: regions, zones, flavors, images,
	// security groups, clouds.yaml entries.
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9 _.:()+-]{0,254}$`)
	// uuidRE is an OpenStack UUID (a network, an image ID).
	uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)
)

// Validate reports every problem at once, each naming the field and value.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.CloudsFile == "" {
		add("cloudsFile: required (a clouds.yaml file of the mounted Secret)")
	}
	if c.Cloud != "" && !nameRE.MatchString(c.Cloud) {
		add("cloud %q: want a clouds.yaml entry's name", c.Cloud)
	}
	if c.Interface != "" && !slices.Contains([]string{"public", "internal", "admin"}, c.Interface) {
		add("interface %q: want public, internal or admin", c.Interface)
	}
	if c.CAFile != "" && c.InsecureSkipTLSVerify {
		add("caFile and insecureSkipTLSVerify: set one, not both")
	}
	if len(c.Regions) == 0 {
		add("regions: at least one is required")
	}
	for _, key := range slices.Sorted(maps.Keys(c.Regions)) {
		r := c.Regions[key]
		if !keyRE.MatchString(key) {
			add("regions[%q]: a region key must match %s", key, keyRE)
		}
		if !nameRE.MatchString(r.Name) {
			add("regions[%q].name %q: want the region's name in the catalogue", key, r.Name)
		}
		if !uuidRE.MatchString(r.Network) {
			add("regions[%q].network %q: want a network's ID", key, r.Network)
		}
		if len(r.Zones) == 0 {
			add("regions[%q].zones: at least one is required", key)
		}
		for _, zk := range slices.Sorted(maps.Keys(r.Zones)) {
			if !keyRE.MatchString(zk) {
				add("regions[%q].zones[%q]: a zone key must match %s", key, zk, keyRE)
			}
			if !nameRE.MatchString(r.Zones[zk]) {
				add("regions[%q].zones[%q] %q: want an availability zone's name", key, zk, r.Zones[zk])
			}
		}
		for _, sg := range r.SecurityGroups {
			if !nameRE.MatchString(sg) {
				add("regions[%q].securityGroups: %q: want a security group's name", key, sg)
			}
		}
		if r.FloatingIPs != nil {
			for _, problem := range r.FloatingIPs.validate(key) {
				add("%s", problem)
			}
		}
		errs = append(errs, r.validateOptions(key)...)
	}
	if len(c.MachineTypes) == 0 {
		add("machineTypes: at least one is required")
	}
	for _, key := range slices.Sorted(maps.Keys(c.MachineTypes)) {
		if !nameRE.MatchString(c.MachineTypes[key]) {
			add("machineTypes[%q] %q: want a flavor's name", key, c.MachineTypes[key])
		}
	}
	if len(c.Images) == 0 {
		add("images: at least one is required")
	}
	for _, key := range slices.Sorted(maps.Keys(c.Images)) {
		if !nameRE.MatchString(c.Images[key]) {
			add("images[%q] %q: want an image's name or ID", key, c.Images[key])
		}
	}
	if c.CallTimeout.Duration < 0 {
		add("callTimeout %s: must not be negative", c.CallTimeout)
	}
	if c.CreateTimeout.Duration < 0 {
		add("createTimeout %s: must not be negative", c.CreateTimeout)
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Cloud == "" {
		c.Cloud = "openstack"
	}
	if c.Interface == "" {
		c.Interface = "public"
	}
	if c.CallTimeout.Duration == 0 {
		c.CallTimeout.Duration = 30 * time.Second
	}
	if c.CreateTimeout.Duration == 0 {
		c.CreateTimeout.Duration = 2 * time.Minute
	}
	return c
}
