package proxy

import (
	"fmt"
	"net/netip"
	"regexp"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/config"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/userdata"
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
func (r *Reconciler) refusal(proxy *v1alpha1.Proxy) (reason, msg string) {
	if !dns1035Label.MatchString(proxy.Name) {
		return v1alpha1.ReasonInvalidName, fmt.Sprintf("metadata.name %q: must be a DNS-1035 label (lowercase letters, digits and '-', starting with a letter, at most 63 characters): it names the Proxy's Service and is its VM's hostname; create the Proxy again under such a name", proxy.Name)
	}
	if err := userdata.EgressError(proxy); err != nil {
		return v1alpha1.ReasonEgressRefused, err.Error()
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
		if config.CoversAll(prefixes, family == "IPv4") {
			return v1alpha1.ReasonAllowedClientsRefused, fmt.Sprintf("%s %v: together they cover all of %s, which would make an open proxy", field, clients, family)
		}
	}
	return "", ""
}
