// Package config reads the operator's providers config file (contract §10):
// a list of configured providers, each with exactly the block of its type,
// plus the operator-wide defaults. Every problem is reported at once, each
// naming the field and the value.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/identity"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// KnownTypes are the provider types this project has, compiled in or not;
// a config naming one that is not compiled in is told which tag to build
// with.
var KnownTypes = []string{"libvirt", "memory", "openstack", "proxmox", "vsphere"}

// Defaults for the optional per-provider settings.
const (
	DefaultGCInterval    = 5 * time.Minute
	DefaultCheckInterval = time.Minute
	DefaultQPS           = 5
	DefaultBurst         = 10
	DefaultConcurrency   = 4
)

// Config is the parsed, validated providers config.
type Config struct {
	// InstallID names this install in the marks of every instance it
	// creates; empty until set: the config may leave it out, and the
	// operator then derives it from the cluster (identity.Default) before
	// Build.
	InstallID string
	Providers []Provider
	// DefaultAllowedClients is what a Proxy without allowedClients allows:
	// the cluster's pod and node ranges.
	DefaultAllowedClients []string
	// AllowedClientsWithin, when set, bounds every Proxy's allowedClients
	// and the defaults: each network must lie inside one of these.
	AllowedClientsWithin Networks
}

// Networks bounds where a proxy's clients may be; empty bounds nothing.
type Networks []netip.Prefix

// Hold reports whether p lies wholly inside one of n, or n is empty.
func (n Networks) Hold(p netip.Prefix) bool {
	return len(n) == 0 || slices.ContainsFunc(n, func(w netip.Prefix) bool { return w.Bits() <= p.Bits() && w.Contains(p.Addr()) })
}

// Provider is one configured provider.
type Provider struct {
	Name          string
	Type          string
	Block         json.RawMessage
	GC            providers.GC
	Limits        providers.Limits
	CheckInterval time.Duration
	// AllowedNamespaces selects the namespaces whose Proxies may use the
	// entry; nil lets every namespace.
	AllowedNamespaces labels.Selector
}

// file is the document as written.
type file struct {
	InstallID             string                       `json:"installID"`
	Providers             []map[string]json.RawMessage `json:"providers"`
	DefaultAllowedClients []string                     `json:"defaultAllowedClients"`
	AllowedClientsWithin  []string                     `json:"allowedClientsWithin"`
}

type gcBlock struct {
	MinAge   *metav1.Duration `json:"minAge"`
	Interval *metav1.Duration `json:"interval"`
}

type limitsBlock struct {
	QPS         *float64 `json:"qps"`
	Burst       *int     `json:"burst"`
	Concurrency *int     `json:"concurrency"`
}

// commonKeys are the keys every provider entry may have besides its block.
var commonKeys = []string{"name", "type", "gc", "limits", "checkInterval", "allowedNamespaces"}

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// Load reads and validates the file at path.
func Load(path string, reg providers.Registry) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("providers config: %w", err)
	}
	cfg, err := Parse(data, reg)
	if err != nil {
		return nil, fmt.Errorf("providers config %s: %w", path, err)
	}
	return cfg, nil
}

// Parse decodes and validates a providers config document. Keys are read
// as the API server reads an object's: a key given twice in one mapping is
// refused with its line (sigs.k8s.io/yaml's strict mode), and a key in the
// wrong case or unknown is refused with its path and line
// (providers.DecodeStrict), at every level of the document.
func Parse(data []byte, reg providers.Registry) (*Config, error) {
	raw, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("not YAML, or a key given twice: %w", err)
	}
	lines := indexKeyLines(data)
	var f file
	if err := providers.DecodeStrict(raw, &f); err != nil {
		return nil, errors.Join(lines.at("", err)...)
	}
	cfg := &Config{}
	return cfg, cfg.validate(&f, reg, lines)
}

// validate fills c from the decoded file, checking every entry against the
// type allow-list (KnownTypes, narrowed to the types compiled into reg),
// the blocks it sets (setBlocks), and its settings; it returns every
// problem found, joined.
func (c *Config) validate(f *file, reg providers.Registry, lines keyLines) error {
	v := &validator{reg: reg, installID: f.InstallID, lines: lines}
	c.InstallID = f.InstallID
	c.DefaultAllowedClients = f.DefaultAllowedClients
	if f.InstallID != "" {
		if err := identity.ValidateInstallID(f.InstallID); err != nil {
			v.errs = append(v.errs, err)
		}
	}
	seen := map[string]int{}
	for i, entry := range f.Providers {
		p, ok := v.provider(fmt.Sprintf("providers[%d]", i), entry)
		if j, dup := seen[p.Name]; dup && p.Name != "" {
			v.addf("providers[%d].name %q: already used by providers[%d]", i, p.Name, j)
			ok = false
		}
		seen[p.Name] = i
		if ok {
			c.Providers = append(c.Providers, p)
		}
	}
	for i, cidr := range f.AllowedClientsWithin {
		pfx, err := netip.ParsePrefix(cidr)
		if err != nil {
			v.addf("allowedClientsWithin[%d] %q: want a CIDR such as 10.0.0.0/8", i, cidr)
			continue
		}
		c.AllowedClientsWithin = append(c.AllowedClientsWithin, pfx.Masked())
	}
	// The bounds the CRD sets on a Proxy's own allowedClients (see
	// v1alpha1.CIDR): no list of them can cover all of IPv4 or IPv6.
	for i, cidr := range c.DefaultAllowedClients {
		pfx, err := netip.ParsePrefix(cidr)
		switch {
		case err != nil:
			v.addf("defaultAllowedClients[%d] %q: want a CIDR such as 10.0.0.0/8", i, cidr)
		case pfx.Addr().Is4() && pfx.Bits() < 8, pfx.Addr().Is6() && pfx.Bits() < 7:
			v.addf("defaultAllowedClients[%d] %q: an IPv4 network must be /8 or longer and an IPv6 one /7 or longer, as in a Proxy's allowedClients: a proxy is never open to the world", i, cidr)
		case !c.AllowedClientsWithin.Hold(pfx):
			v.addf("defaultAllowedClients[%d] %q: outside allowedClientsWithin %v", i, cidr, f.AllowedClientsWithin)
		}
	}
	return errors.Join(v.errs...)
}

type validator struct {
	reg       providers.Registry
	installID string
	lines     keyLines
	errs      []error
}

func (v *validator) addf(format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf(format, args...))
}

// provider validates one entry at path; ok is false when it cannot be used.
func (v *validator) provider(path string, entry map[string]json.RawMessage) (Provider, bool) {
	before := len(v.errs)
	p := Provider{GC: providers.GC{MinAge: contract.DefaultMinAge, Interval: DefaultGCInterval},
		Limits:        providers.Limits{QPS: DefaultQPS, Burst: DefaultBurst, Concurrency: DefaultConcurrency},
		CheckInterval: DefaultCheckInterval}
	v.decode(path+".name", entry["name"], &p.Name)
	v.decode(path+".type", entry["type"], &p.Type)
	if !nameRE.MatchString(p.Name) {
		v.addf("%s.name %q: must be a DNS-1123 label (lowercase letters, digits, '-'; at most 63)", path, p.Name)
	} else if err := ownerFits(v.installID, p.Name); err != nil {
		v.addf("%s.name %q: %w", path, p.Name, err)
	}
	blocks := setBlocks(entry)
	switch {
	case p.Type == "":
		v.addf("%s.type: required; one of %s", path, strings.Join(KnownTypes, ", "))
	case !slices.Contains(KnownTypes, p.Type):
		v.addf("%s.type %q: unknown; one of %s", path, p.Type, strings.Join(KnownTypes, ", "))
	case v.reg[p.Type].New == nil:
		v.addf("%s.type %q: not compiled into this operator (compiled in: %s); build with -tags %q", path, p.Type, strings.Join(v.reg.Types(), ", "), p.Type)
	case !slices.Contains(blocks, p.Type):
		v.addf("%s.%s: the block for type %q is missing", path, p.Type, p.Type)
	default:
		p.Block = entry[p.Type]
		if err := v.reg[p.Type].Validate(p.Block); err != nil {
			v.errs = append(v.errs, v.lines.at(path+"."+p.Type, err)...)
		}
	}
	for _, b := range blocks {
		if b != p.Type {
			v.addf("%s.%s: not a field of a provider of type %q (a provider has %s and the block of its own type)", path, b, p.Type, strings.Join(commonKeys, ", "))
		}
	}
	var gc gcBlock
	if v.decode(path+".gc", entry["gc"], &gc) {
		if gc.MinAge != nil {
			p.GC.MinAge = gc.MinAge.Duration
		}
		if gc.Interval != nil {
			p.GC.Interval = gc.Interval.Duration
		}
		if p.GC.MinAge < time.Minute {
			v.addf("%s.gc.minAge %q: at least 1m, so an instance is never collected between its Create and the status write", path, p.GC.MinAge)
		}
		if p.GC.Interval < 10*time.Second {
			v.addf("%s.gc.interval %q: at least 10s", path, p.GC.Interval)
		}
	}
	var lim limitsBlock
	if v.decode(path+".limits", entry["limits"], &lim) {
		p.Limits.QPS = deref(lim.QPS, p.Limits.QPS)
		p.Limits.Burst = deref(lim.Burst, p.Limits.Burst)
		p.Limits.Concurrency = deref(lim.Concurrency, p.Limits.Concurrency)
		if p.Limits.QPS <= 0 || p.Limits.Burst < 1 || p.Limits.Concurrency < 1 {
			v.addf("%s.limits {qps: %g, burst: %d, concurrency: %d}: each must be positive", path, p.Limits.QPS, p.Limits.Burst, p.Limits.Concurrency)
		}
	}
	var interval metav1.Duration
	if entry["checkInterval"] != nil && v.decode(path+".checkInterval", entry["checkInterval"], &interval) {
		p.CheckInterval = interval.Duration
		if p.CheckInterval < 10*time.Second {
			v.addf("%s.checkInterval %q: at least 10s", path, p.CheckInterval)
		}
	}
	var allowed metav1.LabelSelector
	if entry["allowedNamespaces"] != nil && v.decode(path+".allowedNamespaces", entry["allowedNamespaces"], &allowed) {
		sel, err := metav1.LabelSelectorAsSelector(&allowed)
		if err != nil {
			v.addf("%s.allowedNamespaces: %w", path, err)
		}
		p.AllowedNamespaces = sel
	}
	return p, len(v.errs) == before
}

// ownerFits checks that the Owner of entry fits a mark. Without a
// configured install ID, the derived one has DefaultInstallIDLen
// characters.
func ownerFits(installID, entry string) error {
	shown, n := identity.Owner(installID, entry), len(installID)
	if installID == "" {
		n = identity.DefaultInstallIDLen
		shown = identity.Owner(fmt.Sprintf("<install ID, %d characters by default>", n), entry)
	}
	if n+1+len(entry) > identity.MaxOwnerLen {
		return fmt.Errorf("its owner mark %q is %d characters, more than the %d a mark holds; shorten the name or the installID",
			shown, n+1+len(entry), identity.MaxOwnerLen)
	}
	return nil
}

// setBlocks returns the keys of entry that are not common keys: the type
// blocks it sets. A valid entry sets exactly one, its type's.
func setBlocks(entry map[string]json.RawMessage) []string {
	var blocks []string
	for k := range entry {
		if !slices.Contains(commonKeys, k) {
			blocks = append(blocks, k)
		}
	}
	slices.Sort(blocks)
	return blocks
}

// decode strictly decodes raw (if present) into out, recording an error
// at path; it reports whether out is usable.
func (v *validator) decode(path string, raw json.RawMessage, out any) bool {
	if raw == nil {
		return true
	}
	if err := providers.DecodeStrict(raw, out); err != nil {
		v.errs = append(v.errs, v.lines.at(path, err)...)
		return false
	}
	return true
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
