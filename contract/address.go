package contract

import "net/netip"

// Blocks that hold no address a host can be reached at (RFC 6890):
// "this network" 0.0.0.0/8, and the reserved 240.0.0.0/4, which ends in
// the limited broadcast address 255.255.255.255.
var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	reserved    = netip.MustParsePrefix("240.0.0.0/4")
)

// RoutableIPv4 reports whether ip is an address a proxy's clients can use:
// IPv4, and not unspecified, "this network", loopback, link-local,
// multicast, reserved or broadcast. Every provider reports only such an
// address in Instance.IP (ip-source, §4.3).
func RoutableIPv4(ip string) bool {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	a = a.Unmap()
	return a.Is4() && !thisNetwork.Contains(a) && !a.IsLoopback() &&
		!a.IsLinkLocalUnicast() && !a.IsMulticast() && !reserved.Contains(a)
}

// FirstRoutableIPv4 returns the first of ips that RoutableIPv4 accepts, in
// the order the backend reported them and in dotted-quad form (an
// IPv4-mapped IPv6 address is unmapped), or "" when there is none.
func FirstRoutableIPv4(ips []string) string {
	for _, ip := range ips {
		if RoutableIPv4(ip) {
			return netip.MustParseAddr(ip).Unmap().String()
		}
	}
	return ""
}
