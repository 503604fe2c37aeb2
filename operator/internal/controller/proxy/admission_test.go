package proxy

import (
	"context"
	"strings"
	"testing"

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
