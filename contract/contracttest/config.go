package contracttest

import (
	"slices"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// PromptBound is how long a call may take to return once its context is
// done (docs/architecture.md, Targets: cancelled contexts return within 1 s).
const PromptBound = time.Second

// Config is what a provider's conformance test supplies.
type Config struct {
	// NewProvider returns a provider connected to the backend under test.
	// Each rule calls it once, and again to play a restarted operator: every
	// provider it returns must see the same backend. Required.
	NewProvider func(t *testing.T) contract.Provider

	// Backend controls the backend; it implements any of the capability
	// interfaces of this package. Nil runs only the rules that need none.
	Backend any

	// Placement is a valid placement on the backend. Required.
	Placement contract.Placement

	// OtherPlacements are valid placements in other locations of the
	// provider's scope (another region, zone or node than Placement's).
	// Rules spread their instances over Placement and these, so that
	// ListByTag is shown to cover the whole scope (§4.11); without one,
	// ListByTagCoversEveryLocation is skipped. Give at least one wherever
	// the backend can hold two locations.
	OtherPlacements []contract.Placement

	// MaxCloudInit is the largest CloudInit in bytes the provider's
	// channel holds (its spec's entry 5). InvalidRequestRejectedBeforeBackend
	// creates an instance with exactly this many bytes and expects one more
	// to be rejected before any backend call. Zero skips both cases.
	MaxCloudInit int

	// IgnoredPlacement names the Placement fields the provider ignores
	// (contract §2.1): any of "Region", "Zone", "MachineType", "Image".
	// Rules do not expect an unknown value of these to be rejected.
	IgnoredPlacement []string

	// Credential is the secret the provider authenticates with. The
	// SentinelCredential rule checks that it appears in no log line, span
	// or error; empty skips that rule.
	Credential string

	// GuestIP is the address the GuestReporter reports. Default 192.0.2.10
	// (TEST-NET-1): it is only reported, never contacted.
	GuestIP string

	// StaticNetwork is a static address the backend can give an instance
	// (contract §4.13): for a cloud, a free address of the configured
	// subnet; elsewhere any. The StaticAddressDelivered rule creates with
	// it (and with the next address, of another shape: see
	// NetworkFromBackend) and checks that the guest is given exactly it
	// and that Get reports its IP; nil skips that rule.
	StaticNetwork *contract.StaticNetwork

	// NetworkFromBackend says the backend, not the request, gives the
	// guest its gateway and resolvers (a cloud subnet's, which the
	// provider only checks, §4.13). The StaticAddressDelivered rule's
	// second instance then keeps StaticNetwork's gateway and resolvers;
	// otherwise it asks for another gateway (the network's last host
	// address) and contract.MaxDNS resolvers, so that a provider that
	// assumes the gateway or writes the first resolver only is caught.
	NetworkFromBackend bool

	// Seed seeds the shapes the rules draw where a MUST has more than one
	// (the static network's gateway and resolvers; doc.go lists what each
	// rule draws). Zero: CONTRACTTEST_SEED (SeedEnv) if set, else a new
	// seed each run. A failed rule names its seed, and the same seed draws
	// the same shapes again.
	Seed uint64

	// IPAssignedAtCreate says the backend gives the instance its address
	// when it is made (ip-source: assigned-at-create, §4.3), so Get may say
	// Running with that address before any guest reports one. A provider
	// that discovers the address leaves it false: Running before the guest
	// reports is then an error. With it, the GuestReporter's report plays
	// the backend finishing the assignment (a real cloud's port, whose
	// address the control cannot choose), and Running may carry the
	// backend's address rather than GuestIP.
	IPAssignedAtCreate bool

	// CallBudget is the longest one provider call may take against a
	// hanging backend when the caller set no deadline (contract §1.5).
	// Zero skips the CallsAreBounded rule.
	CallBudget time.Duration

	// WaitTimeout bounds every wait for an asynchronous outcome (Running
	// after a reported IP, NotFound after Delete). Default 30 s.
	WaitTimeout time.Duration

	// ExtraReasons lists the check reasons of the provider's own that its
	// spec justifies, allowed beside contract.SharedReasons.
	ExtraReasons []string

	// NoChildSpans, when set, is the documented reason the provider emits
	// no child spans (child-spans: none); the ChildSpans rule is skipped
	// with it.
	NoChildSpans string

	// NamePrefix starts every instance name the harness makes, so a shared
	// backend shows whose they are. Default "ct".
	NamePrefix string

	// Rules, when set, names the rules to run (RuleNames); the others do
	// not run. For a second pass on a slow backend under another
	// configuration, where the rules that configuration changes are
	// enough; a provider's conformance is still the full run. A name the
	// harness does not know fails the test.
	Rules []string
}

func (c Config) withDefaults(t *testing.T) Config {
	t.Helper()
	if c.NewProvider == nil {
		t.Fatal("contracttest: Config.NewProvider is required")
	}
	if c.GuestIP == "" {
		c.GuestIP = "192.0.2.10"
	}
	if !contract.RoutableIPv4(c.GuestIP) {
		t.Fatalf("contracttest: Config.GuestIP %q is not a routable IPv4 address", c.GuestIP)
	}
	if c.WaitTimeout == 0 {
		c.WaitTimeout = 30 * time.Second
	}
	if c.NamePrefix == "" {
		c.NamePrefix = "ct"
	}
	for _, name := range c.Rules {
		if !slices.Contains(RuleNames(), name) {
			t.Fatalf("contracttest: Config.Rules names %q, not a rule of the harness (RuleNames: %v)", name, RuleNames())
		}
	}
	c.Seed = runSeed(t, c.Seed)
	return c
}

func (c Config) ignores(field string) bool {
	for _, f := range c.IgnoredPlacement {
		if f == field {
			return true
		}
	}
	return false
}
