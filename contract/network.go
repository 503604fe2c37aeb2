package contract

import (
	"net/netip"
	"strconv"
)

// MaxDNS is the most resolvers a StaticNetwork names: glibc's resolv.conf
// reads three (MAXNS), and every guest channel the providers use carries
// at least that many.
const MaxDNS = 3

// StaticNetwork is the address an instance must have, fixed before the
// instance exists: the operator allocates it from an address pool, so
// users can allow-list it first and it survives a replacement (§4.13).
// The provider delivers it to the guest the way its backend does and
// reports exactly Address's IP as Instance.IP.
type StaticNetwork struct {
	// Address is the instance's IPv4 address with its network's prefix
	// length, such as 192.0.2.10/24.
	Address netip.Prefix
	// Gateway is the next hop of the default route, inside Address's
	// network.
	Gateway netip.Addr
	// DNS are the resolvers the guest uses, at most MaxDNS; none leaves
	// the guest's own.
	DNS []netip.Addr
}

// IP is the address the instance is reported at, in dotted-quad form.
func (n StaticNetwork) IP() string { return n.Address.Addr().String() }

// Validate checks the network as every provider needs it: an IPv4 host
// address that RoutableIPv4 accepts, neither its network's first nor (below
// /31) its last address; a gateway in the same network that is not the
// address; at most MaxDNS resolvers. Errors are ErrPermanent FieldErrors
// naming the field (network.address, network.gateway, network.dns[i]) and
// the value.
func (n StaticNetwork) Validate() error {
	a, bits := n.Address.Addr(), n.Address.Bits()
	if !n.Address.IsValid() || !a.Is4() || !RoutableIPv4(a.String()) || bits < 8 {
		return InvalidField("network.address", n.Address.String(), "must be a routable IPv4 address with a prefix length of 8 to 32, such as 192.0.2.10/24")
	}
	network := n.Address.Masked()
	if bits < 31 && (a == network.Addr() || a == lastAddr(network)) {
		return InvalidField("network.address", n.Address.String(), "is its network's own or broadcast address, which no host can have")
	}
	if !n.Gateway.IsValid() || !n.Gateway.Is4() || !network.Contains(n.Gateway) || n.Gateway == a {
		return InvalidField("network.gateway", n.Gateway.String(), "must be an IPv4 address in "+network.String()+" other than the instance's own")
	}
	if len(n.DNS) > MaxDNS {
		return InvalidField("network.dns", strconv.Itoa(len(n.DNS))+" resolvers", "must name at most "+strconv.Itoa(MaxDNS))
	}
	for i, d := range n.DNS {
		if !d.IsValid() || d.IsUnspecified() || d.IsMulticast() {
			return InvalidField("network.dns["+strconv.Itoa(i)+"]", d.String(), "must be a unicast IP address")
		}
	}
	return nil
}

// lastAddr is the last address of an IPv4 network (its broadcast address).
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
