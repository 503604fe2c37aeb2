package proxy

import (
	"strings"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// spec.egress reaches the VM in its default cloud-init, with the Proxy
// named on the refusal page, and a change replaces the VM like any spec
// change: the new one carries the new destinations.
func TestEgressReachesTheVMAndAChangeReplacesIt(t *testing.T) {
	p := newProxy(t, "partner", withEgress(v1alpha1.Destination{Host: "api.partner.example", Ports: []int32{8443}}))
	bootGuest(t, p, current)
	first := waitReady(t, p).Status.Instance
	userData := func(name string) string {
		t.Helper()
		v, ok := createRequests.Load(name)
		if !ok {
			t.Fatalf("no Create of %s", name)
		}
		return string(v.(contract.CreateRequest).CloudInit)
	}
	got := userData(first.Name)
	for _, want := range []string{`^api\.partner\.example:8443$`, "FilterDefaultDeny Yes", "Refused by the egress policy of Proxy default/partner"} {
		if !strings.Contains(got, want) {
			t.Errorf("the VM's cloud-init lacks %q:\n%s", want, got)
		}
	}

	updateSpec(t, p, func(p *v1alpha1.Proxy) {
		p.Spec.Egress.Destinations = append(p.Spec.Egress.Destinations, v1alpha1.Destination{Network: "203.0.113.0/24", Ports: []int32{443}})
	})
	eventually(t, "a replacement is created", func() bool {
		s := get(t, p).Status
		return s.Replacement != nil && s.Replacement.ProviderID != ""
	})
	bootGuest(t, p, replacement)
	now := waitReady(t, p).Status.Instance
	if now.Name == first.Name {
		t.Fatalf("still serving %s after the egress change", now.Name)
	}
	if got := userData(now.Name); !strings.Contains(got, `^203\.0\.113\.`) || !strings.Contains(got, `^api\.partner\.example:8443$`) {
		t.Errorf("the replacement's cloud-init lacks the new destinations:\n%s", got)
	}
}
