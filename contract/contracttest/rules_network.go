package contracttest

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"slices"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// staticAddressDelivered: an instance created with a static network is
// given exactly that network, in the form its guest reads (the backend
// control parses it back), and Get reports exactly its address once
// Running: never an address the guest reports besides it (a DHCP lease).
// Two instances with different addresses show the address is the
// request's, not a constant (§2.2); the second has another gateway and
// three resolvers where the request sets them (Config.NetworkFromBackend),
// so neither is a constant or cut short either. Without a GuestReporter
// only the delivery is checked.
func staticAddressDelivered(e *env) {
	if e.cfg.StaticNetwork == nil {
		e.t.Skip("skipped: Config.StaticNetwork is nil; give an address the backend can give an instance")
	}
	reader := need[NetworkReader](e.t, e.cfg.Backend)
	// Without a GuestReporter (a real backend whose guest cannot be
	// played) the delivery is still checked; Running is then the real
	// guest's to prove.
	guest, hasGuest := e.cfg.Backend.(GuestReporter)
	first := *e.cfg.StaticNetwork
	for _, n := range []contract.StaticNetwork{first, otherShape(first, e.cfg.NetworkFromBackend, e.draw)} {
		req := e.request()
		req.Network = &n
		inst := e.mustCreate(req)
		want := n.IP()
		if inst.IP != "" && inst.IP != want {
			e.t.Errorf("Create with the static address %s returned IP %s", n.Address, inst.IP)
		}
		got, err := reader.DeliveredNetwork(e.ctx(), inst.ProviderID)
		switch {
		case err != nil:
			e.t.Fatalf("backend control DeliveredNetwork(%s): %v", inst.ProviderID, err)
		case !sameNetwork(got, n):
			e.t.Errorf("the guest of %s is given %s via %s, resolvers %v; the request was %s via %s, resolvers %v",
				inst.ProviderID, got.Address, got.Gateway, got.DNS, n.Address, n.Gateway, n.DNS)
		}
		if !hasGuest {
			continue
		}
		if !e.cfg.IPAssignedAtCreate {
			// The guest also reports another address (a lease on a network
			// that has DHCP): the instance is not Running with it.
			other := e.cfg.GuestIP
			if other == want {
				other = neighbour(neighbour(n)).IP()
			}
			if err := guest.ReportIP(e.ctx(), inst.ProviderID, other); err != nil {
				e.t.Fatalf("backend control ReportIP: %v", err)
			}
			if got, err := e.get(e.ctx(), e.p, inst.ProviderID); err == nil && got.State == contract.StateRunning && got.IP != want {
				e.t.Errorf("with only %s reported, Get of an instance given %s = Running with IP %q, want Provisioning until the guest has its address", other, want, got.IP)
			}
		}
		if err := guest.ReportIP(e.ctx(), inst.ProviderID, want); err != nil {
			e.t.Fatalf("backend control ReportIP: %v", err)
		}
		if running := e.waitState(inst.ProviderID, contract.StateRunning); running.IP != want {
			e.t.Errorf("Running with IP %q, the static address was %s", running.IP, want)
		}
	}
}

// neighbour is n with the next host address of its network (or the
// previous one where the next is not a host, or is the gateway).
func neighbour(n contract.StaticNetwork) contract.StaticNetwork {
	out := n
	for _, step := range []func(netip.Addr) netip.Addr{netip.Addr.Next, netip.Addr.Prev} {
		a := n.Address.Addr()
		for range 2 {
			a = step(a)
			out.Address = netip.PrefixFrom(a, n.Address.Bits())
			if out.Validate() == nil {
				return out
			}
		}
	}
	return n
}

// otherShape is n's neighbour with, unless the backend gives the guest
// its gateway and resolvers, a gateway drawn from the network's host
// addresses (never its first, which a provider might assume, nor n's) and
// two to contract.MaxDNS resolvers drawn from the documentation ranges
// (RFC 5737: never contacted). Where the network has no other host
// address, only the resolvers change.
func otherShape(n contract.StaticNetwork, fromBackend bool, draw *rand.Rand) contract.StaticNetwork {
	out := neighbour(n)
	if fromBackend {
		return out
	}
	ranges := []netip.Addr{netip.MustParseAddr("192.0.2.0"), netip.MustParseAddr("198.51.100.0"), netip.MustParseAddr("203.0.113.0")}
	draw.Shuffle(len(ranges), func(i, j int) { ranges[i], ranges[j] = ranges[j], ranges[i] })
	out.DNS = nil
	for _, base := range ranges[:2+draw.IntN(min(contract.MaxDNS, len(ranges))-1)] {
		out.DNS = append(out.DNS, plus(base, 1+draw.IntN(254)))
	}
	network := out.Address.Masked()
	if hosts := 1<<(32-network.Bits()) - 2; hosts > 2 {
		for range 16 {
			// Host 2 to the last: the first host address is left out.
			a := plus(network.Addr(), 2+draw.IntN(hosts-1))
			if a != n.Gateway && a != n.Address.Addr() && a != out.Address.Addr() {
				out.Gateway = a
				break
			}
		}
	}
	return out
}

// plus is the address n after a.
func plus(a netip.Addr, n int) netip.Addr {
	b := a.As4()
	v := binary.BigEndian.Uint32(b[:]) + uint32(n)
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

func sameNetwork(a, b contract.StaticNetwork) bool {
	return a.Address == b.Address && a.Gateway == b.Gateway && slices.Equal(a.DNS, b.DNS)
}
