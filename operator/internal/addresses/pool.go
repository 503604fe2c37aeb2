// Package addresses reads AddressPools and names their allocations: a
// pool's addresses and network, the ProxyAddress name that is the lock on
// an address, overlaps between one provider entry's pools and addresses
// held twice (docs/addresses.md). It holds no client: the Proxy
// reconciler allocates with what it says.
package addresses

import (
	"fmt"
	"net/netip"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// maxPoolAddresses bounds the addresses one pool expands to: the
// allocator walks them, and a pool status counts them. A /20 of proxies
// is more than any install runs.
const maxPoolAddresses = 4096

// Pool is an AddressPool read: its addresses in the order they are
// handed out, and the network every one of them sits on.
type Pool struct {
	Addrs   []netip.Addr
	prefix  int
	gateway netip.Addr
	dns     []netip.Addr
}

// Parse reads a pool's spec, as far as the CRD's CEL rules cannot: a
// range's ends in order, every address on the gateway's network, the size
// bounded. The gateway and the network's own and broadcast addresses (of
// prefix) are skipped: no host can have them. Errors name the field and
// the value.
func Parse(spec *v1alpha1.AddressPoolSpec) (Pool, error) {
	var pn Pool
	pn.prefix = int(spec.Prefix)
	if pn.prefix < 8 || pn.prefix > 32 {
		return pn, fmt.Errorf("spec.prefix: %d must be 8 to 32", spec.Prefix)
	}
	gw, err := netip.ParseAddr(string(spec.Gateway))
	if err != nil || !gw.Is4() {
		return pn, fmt.Errorf("spec.gateway: %q is not an IPv4 address", spec.Gateway)
	}
	pn.gateway = gw
	network := netip.PrefixFrom(gw, pn.prefix).Masked()
	for i, d := range spec.DNS {
		a, err := netip.ParseAddr(string(d))
		if err != nil {
			return pn, fmt.Errorf("spec.dns[%d]: %q is not an IP address", i, d)
		}
		pn.dns = append(pn.dns, a)
	}
	if len(pn.dns) > contract.MaxDNS {
		return pn, fmt.Errorf("spec.dns: %d resolvers, at most %d", len(pn.dns), contract.MaxDNS)
	}
	if spec.AllowedNamespaces != nil {
		// The CRD cannot check a selector's operators; the controller
		// refuses the pool's Proxies while it is wrong (tenancy.go).
		if _, err := metav1.LabelSelectorAsSelector(spec.AllowedNamespaces); err != nil {
			return pn, fmt.Errorf("spec.allowedNamespaces: %w", err)
		}
	}
	seen := map[netip.Addr]bool{}
	for i, entry := range spec.Addresses {
		first, last, err := parseEntry(string(entry))
		if err != nil {
			return pn, fmt.Errorf("spec.addresses[%d]: %q %w", i, entry, err)
		}
		if !network.Contains(first) || !network.Contains(last) {
			return pn, fmt.Errorf("spec.addresses[%d]: %q is not inside %s, the network of gateway %s and prefix %d", i, entry, network, gw, pn.prefix)
		}
		for a := first; ; a = a.Next() {
			if hostAddress(a, network, gw) && !seen[a] {
				if len(pn.Addrs) == maxPoolAddresses {
					return pn, fmt.Errorf("spec.addresses: more than %d addresses", maxPoolAddresses)
				}
				seen[a] = true
				pn.Addrs = append(pn.Addrs, a)
			}
			if a == last {
				break
			}
		}
	}
	return pn, nil
}

// parseEntry reads one entry of spec.addresses as its first and last
// address.
func parseEntry(s string) (first, last netip.Addr, err error) {
	switch {
	case strings.Contains(s, "/"):
		p, err := netip.ParsePrefix(s)
		if err != nil || !p.Addr().Is4() {
			return first, last, fmt.Errorf("is not an IPv4 CIDR")
		}
		p = p.Masked()
		return p.Addr(), lastOf(p), nil
	case strings.Contains(s, "-"):
		a, b, _ := strings.Cut(s, "-")
		first, err1 := netip.ParseAddr(strings.TrimSpace(a))
		last, err2 := netip.ParseAddr(strings.TrimSpace(b))
		if err1 != nil || err2 != nil || !first.Is4() || !last.Is4() {
			return first, last, fmt.Errorf("is not a range of two IPv4 addresses")
		}
		if last.Less(first) {
			return first, last, fmt.Errorf("ends before it starts")
		}
		return first, last, nil
	default:
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			return first, last, fmt.Errorf("is not an IPv4 address")
		}
		return a, a, nil
	}
}

// lastOf is the last address of an IPv4 network.
func lastOf(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= uint32(1)<<(32-p.Bits()) - 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// hostAddress reports whether a host may have a: not the gateway, and, below a
// /31, neither the network's own nor its broadcast address.
func hostAddress(a netip.Addr, network netip.Prefix, gw netip.Addr) bool {
	if a == gw {
		return false
	}
	if network.Bits() < 31 && (a == network.Addr() || a == lastOf(network)) {
		return false
	}
	return true
}

// Contains reports whether the pool hands out a.
func (pn Pool) Contains(a netip.Addr) bool {
	for _, b := range pn.Addrs {
		if a == b {
			return true
		}
	}
	return false
}

// Network is what a VM on address a is given.
func (pn Pool) Network(a netip.Addr) contract.StaticNetwork {
	return contract.StaticNetwork{Address: netip.PrefixFrom(a, pn.prefix), Gateway: pn.gateway, DNS: pn.dns}
}
