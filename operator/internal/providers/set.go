package providers

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Entry is one configured provider, ready for use.
type Entry struct {
	// Name is the configured name Proxies refer to.
	Name string
	// Type is the provider's type.
	Type string
	// Owner is "<installID>-<Name>", the value of the managed mark on every
	// instance this entry creates: what its garbage collector lists, and
	// what tells its instances from another install's or entry's on a
	// shared backend.
	Owner string
	// Provider is the decorated provider: limits, spans, metrics, log keys.
	Provider contract.Provider
	// GC says how the garbage collector treats this provider's instances.
	GC GC
	// CheckInterval is how often the health checker runs the provider's
	// Checker.
	CheckInterval time.Duration
	// AllowedNamespaces selects the namespaces whose Proxies may use the
	// entry (the config's allowedNamespaces); nil lets every namespace.
	AllowedNamespaces labels.Selector
}

// GC is one provider's garbage-collection settings.
type GC struct {
	// MinAge is the age below which an instance is never collected.
	MinAge time.Duration
	// Interval is the time between sweeps.
	Interval time.Duration
}

// Set is the configured providers, by name. It is built once at start and
// read concurrently afterwards.
type Set struct {
	entries map[string]*Entry
	order   []string
}

// NewSet returns a set of entries in their config order.
func NewSet(entries ...*Entry) *Set {
	s := &Set{entries: map[string]*Entry{}}
	for _, e := range entries {
		s.entries[e.Name] = e
		s.order = append(s.order, e.Name)
	}
	return s
}

// Get returns the entry named name.
func (s *Set) Get(name string) (*Entry, bool) {
	e, ok := s.entries[name]
	return e, ok
}

// All returns every entry in config order.
func (s *Set) All() []*Entry {
	out := make([]*Entry, 0, len(s.order))
	for _, n := range s.order {
		out = append(out, s.entries[n])
	}
	return out
}

// Names returns the configured names in config order.
func (s *Set) Names() []string { return slices.Clone(s.order) }
