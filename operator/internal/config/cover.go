package config

import (
	"net/netip"
	"slices"
)

// CoversAll reports whether the union of prefixes covers the whole IPv4
// (v4) or IPv6 address space: sorted by first address, each must begin no
// later than one past the end of those before it, from the first address
// of the space to its last.
func CoversAll(prefixes []netip.Prefix, v4 bool) bool {
	var family []netip.Prefix
	for _, p := range prefixes {
		if p.Addr().Is4() == v4 {
			family = append(family, p)
		}
	}
	slices.SortFunc(family, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	next := netip.IPv6Unspecified()
	if v4 {
		next = netip.IPv4Unspecified()
	}
	for _, p := range family {
		if p.Addr().Compare(next) > 0 {
			return false // a gap before p
		}
		last := lastAddr(p)
		if !last.Next().IsValid() {
			return true // p reaches the end of the space
		}
		if last.Next().Compare(next) > 0 {
			next = last.Next()
		}
	}
	return false
}

// lastAddr is the highest address in p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		switch {
		case bits >= 8*(i+1):
		case bits <= 8*i:
			b[i] = 0xff
		default:
			b[i] |= 0xff >> (bits - 8*i)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
