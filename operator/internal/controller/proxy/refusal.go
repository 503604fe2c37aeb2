package controller

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// dns1035Label is what a Proxy's name must be: it names its Service and is
// its VM's hostname. The CRD refuses other names at admission; a Proxy
// created before that rule existed is refused here.
var dns1035Label = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

// refusal says why the operator will not provision a Proxy that admission
// let through — one created before the CRD's rules existed, or one the
// operator's config bounds further (allowedClientsWithin) — as a reason
// and a message naming the field and the value; "" when it will. It makes
// no backend call.
func (r *ProxyReconciler) refusal(proxy *v1alpha1.Proxy) (reason, msg string) {
	if !dns1035Label.MatchString(proxy.Name) {
		return v1alpha1.ReasonInvalidName, fmt.Sprintf("metadata.name %q: must be a DNS-1035 label (lowercase letters, digits and '-', starting with a letter, at most 63 characters): it names the Proxy's Service and is its VM's hostname; create the Proxy again under such a name", proxy.Name)
	}
	field, clients := "spec.allowedClients", make([]string, 0, len(proxy.Spec.AllowedClients))
	for _, c := range proxy.Spec.AllowedClients {
		clients = append(clients, string(c))
	}
	if len(clients) == 0 {
		field, clients = "the operator's defaultAllowedClients", r.DefaultAllowedClients
	}
	var prefixes []netip.Prefix
	for i, c := range clients {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return v1alpha1.ReasonAllowedClientsRefused, fmt.Sprintf("%s[%d] %q: not a CIDR", field, i, c)
		}
		if !r.AllowedClientsWithin.Hold(p) {
			return v1alpha1.ReasonAllowedClientsRefused, fmt.Sprintf("%s[%d] %q: outside the networks the operator's config allows clients in (allowedClientsWithin: %v)", field, i, c, r.AllowedClientsWithin)
		}
		prefixes = append(prefixes, p.Masked())
	}
	for _, family := range []string{"IPv4", "IPv6"} {
		if coversAll(prefixes, family == "IPv4") {
			return v1alpha1.ReasonAllowedClientsRefused, fmt.Sprintf("%s %v: together they cover all of %s, which would make an open proxy", field, clients, family)
		}
	}
	return "", ""
}

// coversAll reports whether the union of prefixes covers the whole IPv4
// (v4) or IPv6 address space: sorted by first address, each must begin no
// later than one past the end of those before it, from the first address
// of the space to its last.
func coversAll(prefixes []netip.Prefix, v4 bool) bool {
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
