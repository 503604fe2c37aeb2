package controller

import (
	"net/netip"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

func TestCoversAll(t *testing.T) {
	parse := func(cidrs ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, c := range cidrs {
			out = append(out, netip.MustParsePrefix(c))
		}
		return out
	}
	for _, tc := range []struct {
		cidrs  []string
		v4, v6 bool
	}{
		{[]string{"0.0.0.0/1", "128.0.0.0/1"}, true, false},
		{[]string{"128.0.0.0/1", "0.0.0.0/1"}, true, false},
		{[]string{"0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/2"}, true, false},
		{[]string{"0.0.0.0/1", "128.0.0.0/2", "224.0.0.0/3"}, false, false}, // 192/3 missing
		{[]string{"0.0.0.0/1", "0.0.0.0/2", "128.0.0.0/1"}, true, false},    // overlapping
		{[]string{"0.0.0.0/1"}, false, false},
		{[]string{"128.0.0.0/1"}, false, false},
		{[]string{"10.0.0.0/8"}, false, false},
		{[]string{"::/1", "8000::/1"}, false, true},
		{[]string{"::/1", "8000::/2"}, false, false},
		{[]string{"0.0.0.0/0"}, true, false},
		{nil, false, false},
	} {
		p := parse(tc.cidrs...)
		if got := coversAll(p, true); got != tc.v4 {
			t.Errorf("coversAll(%v, IPv4) = %v", tc.cidrs, got)
		}
		if got := coversAll(p, false); got != tc.v6 {
			t.Errorf("coversAll(%v, IPv6) = %v", tc.cidrs, got)
		}
	}
	if got := lastAddr(netip.MustParsePrefix("10.1.2.0/23")); got != netip.MustParseAddr("10.1.3.255") {
		t.Errorf("lastAddr(10.1.2.0/23) = %v", got)
	}
}

// What admission could not refuse — a Proxy from before the CRD's rules,
// the defaults, the config's allowedClientsWithin — is refused before any
// backend call, naming the field and the value.
func TestRefusal(t *testing.T) {
	r := &ProxyReconciler{DefaultAllowedClients: []string{"10.0.0.0/8"}}
	proxy := func(name string, clients ...v1alpha1.CIDR) *v1alpha1.Proxy {
		return &v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ProxySpec{AllowedClients: clients}}
	}
	for _, tc := range []struct {
		proxy  *v1alpha1.Proxy
		within []string
		reason string
		says   []string
	}{
		{proxy("web"), nil, "", nil},
		{proxy("web", "192.168.0.0/16"), []string{"192.168.0.0/16"}, "", nil},
		{proxy("egress.team-a"), nil, v1alpha1.ReasonInvalidName, []string{"metadata.name", `"egress.team-a"`}},
		{proxy(strings.Repeat("e", 64)), nil, v1alpha1.ReasonInvalidName, []string{"metadata.name"}},
		{proxy("web", "0.0.0.0/1", "128.0.0.0/1"), nil, v1alpha1.ReasonAllowedClientsRefused, []string{"spec.allowedClients", "all of IPv4"}},
		{proxy("web", "10.0.0.0/8", "::/1", "8000::/1"), nil, v1alpha1.ReasonAllowedClientsRefused, []string{"all of IPv6"}},
		{proxy("web", "10.0.0.0/8", "172.16.0.0/12"), []string{"10.0.0.0/8"}, v1alpha1.ReasonAllowedClientsRefused, []string{"spec.allowedClients[1]", `"172.16.0.0/12"`, "allowedClientsWithin"}},
		{proxy("web", "10.0.0.0/7"), []string{"10.0.0.0/8"}, v1alpha1.ReasonAllowedClientsRefused, []string{"spec.allowedClients[0]"}},
		{proxy("web"), []string{"192.168.0.0/16"}, v1alpha1.ReasonAllowedClientsRefused, []string{"defaultAllowedClients[0]", `"10.0.0.0/8"`}},
	} {
		r.AllowedClientsWithin = nil
		for _, w := range tc.within {
			r.AllowedClientsWithin = append(r.AllowedClientsWithin, netip.MustParsePrefix(w))
		}
		reason, msg := r.refusal(tc.proxy)
		if reason != tc.reason {
			t.Errorf("%s %v within %v: reason %q (%s), want %q", tc.proxy.Name, tc.proxy.Spec.AllowedClients, tc.within, reason, msg, tc.reason)
		}
		for _, s := range tc.says {
			if !strings.Contains(msg, s) {
				t.Errorf("%s %v: message %q does not say %q", tc.proxy.Name, tc.proxy.Spec.AllowedClients, msg, s)
			}
		}
	}
}
