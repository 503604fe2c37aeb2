package proxy

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// The CRD's OpenAPI and CEL rules reject what can be rejected at admission,
// naming the field.
func TestAdmissionRejectsInvalidProxies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha1.Proxy)
		want   []string
	}{
		{"port out of range", func(p *v1alpha1.Proxy) { p.Spec.Port = 70000 }, []string{"spec.port"}},
		{"open to the world", func(p *v1alpha1.Proxy) { p.Spec.AllowedClients = []v1alpha1.CIDR{"0.0.0.0/0"} }, []string{"spec.allowedClients[0]", "all of IPv4 or IPv6"}},
		// Two halves are all of IPv4: no single entry is a /0, the union is.
		{"open to the world in two halves", func(p *v1alpha1.Proxy) { p.Spec.AllowedClients = []v1alpha1.CIDR{"0.0.0.0/1", "128.0.0.0/1"} }, []string{"spec.allowedClients[0]", "spec.allowedClients[1]", "/8 or longer"}},
		{"IPv6 open to the world in two halves", func(p *v1alpha1.Proxy) { p.Spec.AllowedClients = []v1alpha1.CIDR{"::/1", "8000::/1"} }, []string{"spec.allowedClients[0]", "/7 or longer"}},
		{"an IPv4 network wider than /8", func(p *v1alpha1.Proxy) { p.Spec.AllowedClients = []v1alpha1.CIDR{"10.0.0.0/8", "64.0.0.0/7"} }, []string{"spec.allowedClients[1]"}},
		// The Service and the VM's hostname both take the name: a dot or a
		// leading digit is a valid object name but neither of those.
		{"a name with a dot", func(p *v1alpha1.Proxy) { p.Name = "egress.team-a" }, []string{"metadata.name", "DNS-1035"}},
		{"a name starting with a digit", func(p *v1alpha1.Proxy) { p.Name = "1egress" }, []string{"metadata.name", "DNS-1035"}},
		{"a name longer than 63", func(p *v1alpha1.Proxy) { p.Name = strings.Repeat("e", 64) }, []string{"metadata.name", "at most 63"}},
		{"not a CIDR", func(p *v1alpha1.Proxy) { p.Spec.AllowedClients = []v1alpha1.CIDR{"10.0.0.300/8"} }, []string{"spec.allowedClients[0]", "must be a CIDR"}},
		{"no provider", func(p *v1alpha1.Proxy) { p.Spec.Provider = "" }, []string{"spec.provider"}},
		{"bad region", func(p *v1alpha1.Proxy) { p.Spec.Placement.Region = "eu west!" }, []string{"spec.placement.region"}},
		{"egress without destinations", withEgress(), []string{"spec.egress.destinations"}},
		{"a destination with host and network", withEgress(v1alpha1.Destination{Host: "a.example", Network: "10.0.0.0/8"}), []string{"spec.egress.destinations[0]", "set one of host and network"}},
		{"a destination with neither", withEgress(v1alpha1.Destination{Ports: []int32{443}}), []string{"spec.egress.destinations[0]", "set one of host and network"}},
		{"an upper-case host", withEgress(v1alpha1.Destination{Host: "API.partner.example"}), []string{"spec.egress.destinations[0].host"}},
		{"a wildcard inside a name", withEgress(v1alpha1.Destination{Host: "api.*.example"}), []string{"spec.egress.destinations[0].host"}},
		{"a host that injects a rule", withEgress(v1alpha1.Destination{Host: "a.example\nhttp_access allow all"}), []string{"spec.egress.destinations[0].host"}},
		{"an address as a host", withEgress(v1alpha1.Destination{Host: "203.0.113.7"}), []string{"spec.egress.destinations[0].host", "list it as network"}},
		{"a network not by its first address", withEgress(v1alpha1.Destination{Network: "203.0.113.7/24"}), []string{"spec.egress.destinations[0].network", "first address"}},
		{"every destination as a network", withEgress(v1alpha1.Destination{Network: "0.0.0.0/0"}), []string{"spec.egress.destinations[0].network", "leave spec.egress unset"}},
		{"an IPv6 network", withEgress(v1alpha1.Destination{Network: "2001:db8::/32"}), []string{"spec.egress.destinations[0].network"}},
		{"port 0", withEgress(v1alpha1.Destination{Host: "a.example", Ports: []int32{0}}), []string{"spec.egress.destinations[0].ports[0]"}},
		{"a port above 65535", withEgress(v1alpha1.Destination{Host: "a.example", Ports: []int32{443, 70000}}), []string{"spec.egress.destinations[0].ports[1]"}},
		{"a port twice", withEgress(v1alpha1.Destination{Host: "a.example", Ports: []int32{443, 443}}), []string{"spec.egress.destinations[0].ports[1]", "Duplicate"}},
		{"65 destinations", func(p *v1alpha1.Proxy) {
			p.Spec.Egress = &v1alpha1.Egress{}
			for i := range 65 {
				p.Spec.Egress.Destinations = append(p.Spec.Egress.Destinations, v1alpha1.Destination{Host: fmt.Sprintf("h%d.example", i)})
			}
		}, []string{"spec.egress.destinations", "64"}},
		{"egress beside a cloud-init of one's own", func(p *v1alpha1.Proxy) {
			withEgress(v1alpha1.Destination{Host: "a.example"})(p)
			p.Spec.CloudInit = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "own"}, Key: "user-data"}
		}, []string{"spec.egress", "with cloudInit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1alpha1.Proxy{
				ObjectMeta: metav1.ObjectMeta{Name: "invalid", Namespace: testNamespace},
				Spec:       v1alpha1.ProxySpec{Provider: testProvider, Port: 3128},
			}
			tc.mutate(p)
			err := k8s.Create(context.Background(), p)
			if err == nil {
				_ = k8s.Delete(context.Background(), p)
				t.Fatal("accepted")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the rejection does not say %q: %v", want, err)
				}
			}
		})
	}
}

func TestProviderIsImmutable(t *testing.T) {
	p := newProxy(t, "immutable", func(p *v1alpha1.Proxy) { p.Spec.Provider = "nowhere" })
	t.Cleanup(func() { releaseByHand(t, k8s, p) }) // its entry never comes
	// The reconciler writes the object too: retry on conflicts until the
	// API server judges the change itself.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := get(t, p)
		got.Spec.Provider = testProvider
		return k8s.Update(context.Background(), got)
	})
	if err == nil || !strings.Contains(err.Error(), "provider is immutable") {
		t.Fatalf("changing spec.provider: %v, want the immutability rule", err)
	}
}

func TestPortDefaultsTo3128(t *testing.T) {
	p := newProxy(t, "defaulted", func(p *v1alpha1.Proxy) { p.Spec.Port = 0 })
	if got := get(t, p).Spec.Port; got != 3128 {
		t.Errorf("port defaulted to %d, want 3128", got)
	}
}

// The bounds admit every private range, IPv4 and IPv6, and a name of
// exactly 63 characters.
func TestAdmissionAcceptsPrivateRanges(t *testing.T) {
	p := newProxy(t, "e"+strings.Repeat("x", 62), func(p *v1alpha1.Proxy) {
		p.Spec.Provider = "nowhere" // nothing to provision: admission is the test
		p.Spec.AllowedClients = []v1alpha1.CIDR{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"}
	})
	t.Cleanup(func() { releaseByHand(t, k8s, p) }) // its entry never comes
	if got := get(t, p); len(got.Spec.AllowedClients) != 5 {
		t.Errorf("allowedClients stored as %v", got.Spec.AllowedClients)
	}
}

// withEgress sets spec.egress to the destinations.
func withEgress(dests ...v1alpha1.Destination) func(*v1alpha1.Proxy) {
	return func(p *v1alpha1.Proxy) { p.Spec.Egress = &v1alpha1.Egress{Destinations: dests} }
}

// Every destination form the API documents is admitted as written.
func TestAdmissionAcceptsEveryDestinationForm(t *testing.T) {
	dests := []v1alpha1.Destination{
		{Host: "api.partner.example"},
		{Host: "*.partner.example", Ports: []int32{443, 8443}},
		{Host: strings.Repeat("a", 63) + ".example"},
		{Network: "203.0.113.0/24", Ports: []int32{443}},
		{Network: "198.51.100.7/32"},
		{Network: "128.0.0.0/1"},
	}
	p := newProxy(t, "every-form", func(p *v1alpha1.Proxy) {
		p.Spec.Provider = "nowhere" // nothing to provision: admission is the test
		withEgress(dests...)(p)
	})
	t.Cleanup(func() { releaseByHand(t, k8s, p) })
	if got := get(t, p).Spec.Egress; got == nil || !reflect.DeepEqual(got.Destinations, dests) {
		t.Errorf("egress stored as %+v", got)
	}
}
