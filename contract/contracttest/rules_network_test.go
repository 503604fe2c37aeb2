package contracttest

import (
	"net/netip"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// otherShape gives a valid network of another address, gateway and
// resolver count on every network size a test config uses, and keeps
// the backend's gateway and resolvers when the backend gives them.
func TestOtherShape(t *testing.T) {
	dns := []netip.Addr{netip.MustParseAddr("10.0.0.53")}
	for _, c := range []struct{ address, gateway string }{
		{"10.0.0.20/24", "10.0.0.1"},
		{"10.0.0.253/24", "10.0.0.254"},
		{"10.0.0.1/29", "10.0.0.2"},
		{"10.0.0.5/29", "10.0.0.1"},
	} {
		n := contract.StaticNetwork{Address: netip.MustParsePrefix(c.address), Gateway: netip.MustParseAddr(c.gateway), DNS: dns}
		got := otherShape(n, false)
		if err := got.Validate(); err != nil {
			t.Errorf("otherShape(%s via %s) = %+v: %v", c.address, c.gateway, got, err)
		}
		if got.Address == n.Address {
			t.Errorf("otherShape(%s via %s) kept the address", c.address, c.gateway)
		}
		if got.Gateway == netip.MustParseAddr("10.0.0.1") || (got.Gateway == n.Gateway || len(got.DNS) != contract.MaxDNS) {
			t.Errorf("otherShape(%s via %s) = via %s with %d resolvers; want another gateway, not the first host address, and %d resolvers", c.address, c.gateway, got.Gateway, len(got.DNS), contract.MaxDNS)
		}
		if kept := otherShape(n, true); kept.Gateway != n.Gateway || len(kept.DNS) != 1 || kept.Address == n.Address {
			t.Errorf("otherShape(%s via %s, from the backend) = %+v; want the next address with the same gateway and resolvers", c.address, c.gateway, kept)
		}
	}
}
