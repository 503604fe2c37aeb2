package contracttest

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// otherShape draws, on every network size a test config uses, a valid
// network of another address with a gateway that is neither the
// network's first host address nor the request's, and two or more
// resolvers; the same seed draws the same network; and it keeps the
// backend's gateway and resolvers when the backend gives them.
func TestOtherShape(t *testing.T) {
	dns := []netip.Addr{netip.MustParseAddr("10.0.0.53")}
	for _, c := range []struct{ address, gateway string }{
		{"10.0.0.20/24", "10.0.0.1"},
		{"10.0.0.253/24", "10.0.0.254"},
		{"10.0.0.1/29", "10.0.0.2"},
		{"10.0.0.5/29", "10.0.0.1"},
		{"10.20.0.5/16", "10.20.0.1"},
	} {
		n := contract.StaticNetwork{Address: netip.MustParsePrefix(c.address), Gateway: netip.MustParseAddr(c.gateway), DNS: dns}
		first := n.Address.Masked().Addr().Next()
		gateways, counts := map[netip.Addr]bool{}, map[int]bool{}
		for seed := range uint64(200) {
			got := otherShape(n, false, rand.New(rand.NewPCG(seed, 0)))
			if err := got.Validate(); err != nil {
				t.Fatalf("otherShape(%s via %s), seed %d = %+v: %v", c.address, c.gateway, seed, got, err)
			}
			if got.Address == n.Address || got.Gateway == n.Gateway || got.Gateway == first || len(got.DNS) < 2 {
				t.Fatalf("otherShape(%s via %s), seed %d = %s via %s with %d resolvers; want another address, a gateway other than %s and %s, and 2 or more resolvers",
					c.address, c.gateway, seed, got.Address, got.Gateway, len(got.DNS), n.Gateway, first)
			}
			if again := otherShape(n, false, rand.New(rand.NewPCG(seed, 0))); !sameNetwork(again, got) {
				t.Fatalf("seed %d drew %+v, then %+v", seed, got, again)
			}
			gateways[got.Gateway], counts[len(got.DNS)] = true, true
		}
		if len(gateways) < 3 || len(counts) != contract.MaxDNS-1 {
			t.Errorf("otherShape(%s via %s) over 200 seeds drew gateways %v and resolver counts %v; want several of each", c.address, c.gateway, gateways, counts)
		}
		if kept := otherShape(n, true, rand.New(rand.NewPCG(1, 0))); kept.Gateway != n.Gateway || !slices.Equal(kept.DNS, dns) || kept.Address == n.Address {
			t.Errorf("otherShape(%s via %s, from the backend) = %+v; want the next address with the same gateway and resolvers", c.address, c.gateway, kept)
		}
	}
}
