package proxy

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// What admission could not refuse — a Proxy from before the CRD's rules,
// the defaults, the config's allowedClientsWithin — is refused before any
// backend call, naming the field and the value.
func TestRefusal(t *testing.T) {
	r := &Reconciler{DefaultAllowedClients: []string{"10.0.0.0/8"}}
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
		{egress(proxy("web"), v1alpha1.Destination{Host: "api.partner.example"}), nil, "", nil},
		{egress(proxy("web"), v1alpha1.Destination{Host: "api.partner.example"}, v1alpha1.Destination{Network: "203.0.113.7/24"}), nil,
			v1alpha1.ReasonEgressRefused, []string{"spec.egress.destinations[1].network", `"203.0.113.7/24"`}},
		{egress(proxy("web"), v1alpha1.Destination{Host: "API.partner.example", Ports: []int32{443}}), nil,
			v1alpha1.ReasonEgressRefused, []string{"spec.egress.destinations[0].host", `"API.partner.example"`}},
		{egress(proxy("web")), nil, v1alpha1.ReasonEgressRefused, []string{"spec.egress.destinations", "empty"}},
		{withCloudInit(egress(proxy("web"), v1alpha1.Destination{Host: "api.partner.example"})), nil,
			v1alpha1.ReasonEgressRefused, []string{"spec.egress", "spec.cloudInit"}},
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

func egress(p *v1alpha1.Proxy, dests ...v1alpha1.Destination) *v1alpha1.Proxy {
	p.Spec.Egress = &v1alpha1.Egress{Destinations: dests}
	return p
}

func withCloudInit(p *v1alpha1.Proxy) *v1alpha1.Proxy {
	p.Spec.CloudInit = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "own"}, Key: "user-data"}
	return p
}
