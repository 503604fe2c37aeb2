package contracttest

import (
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
	for _, n := range []contract.StaticNetwork{first, otherShape(first, e.cfg.NetworkFromBackend)} {
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
// its gateway and resolvers, another gateway (a host address near it:
// neither the network's first, which a provider might assume, nor n's)
// and contract.MaxDNS resolvers from the documentation ranges (RFC 5737:
// never contacted). Where the network has no such address, only the
// resolvers change.
func otherShape(n contract.StaticNetwork, fromBackend bool) contract.StaticNetwork {
	out := neighbour(n)
	if fromBackend {
		return out
	}
	resolvers := []netip.Addr{netip.MustParseAddr("203.0.113.53"), netip.MustParseAddr("198.51.100.53"), netip.MustParseAddr("192.0.2.53")}
	out.DNS = resolvers[:min(len(resolvers), contract.MaxDNS)]
	network := out.Address.Masked()
	for _, step := range []func(netip.Addr) netip.Addr{netip.Addr.Next, netip.Addr.Prev} {
		for a, i := step(out.Address.Addr()), 0; i < 8 && network.Contains(a); a, i = step(a), i+1 {
			host := a != network.Addr() && network.Contains(a.Next())
			if host && a != network.Addr().Next() && a != n.Gateway && a != n.Address.Addr() {
				out.Gateway = a
				return out
			}
		}
	}
	return out
}

func sameNetwork(a, b contract.StaticNetwork) bool {
	return a.Address == b.Address && a.Gateway == b.Gateway && slices.Equal(a.DNS, b.DNS)
}
