package addresses

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// An address is unique per provider entry, not per pool (docs/addresses.md):
// one entry's pools may share a network, and two of them handing out one
// address would put it on two VMs. The ProxyAddress's name is the entry's
// and the address's (Name), so even two overlapping pools cannot
// both allocate it; and of two overlapping pools the younger is refused,
// so its Proxies say why rather than compete for the older one's
// addresses. CEL sees one object at a time and cannot refuse the overlap
// at admission.

// Overlap is an older pool of the same provider entry that hands out some
// of pool's addresses, and those addresses.
type Overlap struct {
	Pool  string
	Addrs []netip.Addr
}

// OverlapOf returns the first older pool of pool's provider entry whose
// addresses meet pool's (pn), or nil. Older: created earlier, or at the
// same second with a smaller name, so every reader refuses the same one
// of two. A pool that does not parse hands out nothing and overlaps
// nothing.
func OverlapOf(pool *v1alpha1.AddressPool, pn Pool, pools []v1alpha1.AddressPool) *Overlap {
	mine := map[netip.Addr]bool{}
	for _, a := range pn.Addrs {
		mine[a] = true
	}
	older := slices.Clone(pools)
	slices.SortFunc(older, func(a, b v1alpha1.AddressPool) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for i := range older {
		other := &older[i]
		if other.Name == pool.Name {
			// Every pool after this one is younger.
			return nil
		}
		if other.Spec.Provider != pool.Spec.Provider || !other.DeletionTimestamp.IsZero() {
			continue
		}
		on, err := Parse(&other.Spec)
		if err != nil {
			continue
		}
		var shared []netip.Addr
		for _, a := range on.Addrs {
			if mine[a] {
				shared = append(shared, a)
			}
		}
		if len(shared) > 0 {
			slices.SortFunc(shared, netip.Addr.Compare)
			return &Overlap{Pool: other.Name, Addrs: shared}
		}
	}
	return nil
}

// Message says which pools overlap where, for the younger pool's Valid
// condition and its Proxies.
func (o *Overlap) Message(pool, provider string) string {
	return fmt.Sprintf("spec.addresses: AddressPool %q hands out %s, which AddressPool %q (older, same provider entry %q) hands out too; "+
		"an address is unique per provider entry, so this pool hands out none until the overlap is removed",
		pool, Ranges(o.Addrs), o.Pool, provider)
}

// Ranges writes sorted addresses as comma-separated ranges:
// 192.0.2.10-192.0.2.12, 192.0.2.20.
func Ranges(addrs []netip.Addr) string {
	var out []string
	for i := 0; i < len(addrs); {
		j := i
		for j+1 < len(addrs) && addrs[j].Next() == addrs[j+1] {
			j++
		}
		if i == j {
			out = append(out, addrs[i].String())
		} else {
			out = append(out, addrs[i].String()+"-"+addrs[j].String())
		}
		i = j + 1
	}
	return strings.Join(out, ", ")
}

// Duplicates names each address of the given ProxyAddresses (one provider
// entry's) that more than one of them holds, with its holders, for the
// pools among them: the allocations overlapping pools made before the
// overlap was refused, reported and never resolved by the operator.
func Duplicates(held []v1alpha1.ProxyAddress, pool string) []string {
	byAddr := map[netip.Addr][]*v1alpha1.ProxyAddress{}
	for i := range held {
		h := &held[i]
		if p, err := netip.ParsePrefix(h.Spec.Address); err == nil {
			byAddr[p.Addr()] = append(byAddr[p.Addr()], h)
		}
	}
	var out []string
	for a, hs := range byAddr {
		if len(hs) < 2 || !slices.ContainsFunc(hs, func(h *v1alpha1.ProxyAddress) bool { return h.Spec.Pool == pool }) {
			continue
		}
		var who []string
		for _, h := range hs {
			who = append(who, fmt.Sprintf("ProxyAddress %s (AddressPool %s, Proxy %s/%s)", h.Name, h.Spec.Pool, h.Spec.Proxy.Namespace, h.Spec.Proxy.Name))
		}
		slices.Sort(who)
		out = append(out, fmt.Sprintf("%s is held by %s", a, strings.Join(who, " and ")))
	}
	slices.Sort(out)
	return out
}
