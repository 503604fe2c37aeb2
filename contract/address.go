package contract

import "net/netip"

// RoutableIPv4 reports whether ip is an address a proxy's clients can use:
// IPv4, and not unspecified, loopback, link-local or multicast. Every
// provider reports only such an address in Instance.IP (ip-source, §4.3).
func RoutableIPv4(ip string) bool {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	a = a.Unmap()
	return a.Is4() && !a.IsUnspecified() && !a.IsLoopback() &&
		!a.IsLinkLocalUnicast() && !a.IsMulticast()
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
