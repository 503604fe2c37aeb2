package replica

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// An instance name is a DNS-1123 label starting with as much of the
// Proxy's name as fits, the same for the same Proxy and spec, and different
// for another Proxy or spec.
func TestInstanceName(t *testing.T) {
	proxy := func(name, uid string) *v1alpha1.Proxy {
		return &v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}}
	}
	const hash = "0123456789abcdef"
	// 63 = the prefix, "-" and a 10-character suffix: 52 characters of the
	// name fit.
	fits := strings.Repeat("a", 52)
	for _, tc := range []struct{ name, wantPrefix string }{
		{"web", "web-"},
		{fits, fits + "-"},
		{fits + "b", fits + "-"},
		{strings.Repeat("x", 51) + ".yz", strings.Repeat("x", 51) + "-"}, // cut after the dot, the dot dropped
		{strings.Repeat("x", 50) + "-.yz", strings.Repeat("x", 50) + "-"},
		{"egress.team-a", "egress-team-a-"}, // a dot is not allowed in a label
		{strings.Repeat("n", 253), strings.Repeat("n", 52) + "-"},
	} {
		got := instanceName(proxy(tc.name, "uid-1"), hash)
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
			t.Errorf("instanceName(%q) = %q: %v", tc.name, got, errs)
		}
		if !strings.HasPrefix(got, tc.wantPrefix) || len(got) != len(tc.wantPrefix)+10 {
			t.Errorf("instanceName(%q) = %q, want %q and a 10-character suffix", tc.name, got, tc.wantPrefix)
		}
	}
	a := instanceName(proxy("web", "uid-1"), hash)
	if again := instanceName(proxy("web", "uid-1"), hash); again != a {
		t.Errorf("instanceName is not deterministic: %s then %s", a, again)
	}
	if other := instanceName(proxy("web", "uid-2"), hash); other == a {
		t.Errorf("two Proxies named web share the instance name %s", a)
	}
	if other := instanceName(proxy("web", "uid-1"), "fedcba9876543210"); other == a {
		t.Errorf("a changed spec keeps the instance name %s", a)
	}
}

// The spec hash changes with every field of the user's intent — the spec
// fields that reach the provider or the guest, a user-supplied cloud-init,
// the roll annotation — and with nothing else: not labels, other
// annotations, the order of allowedClients, nor the operator's rendering.
func TestSpecHash(t *testing.T) {
	base := &v1alpha1.Proxy{Spec: v1alpha1.ProxySpec{Provider: "mem", Placement: v1alpha1.Placement{Region: "r1", MachineType: "small", Image: "debian-12"}, Port: 3128,
		AllowedClients: []v1alpha1.CIDR{"10.1.0.0/16", "10.2.0.0/16"}}}
	h := SpecHash(base, nil)
	if len(h) != 16 {
		t.Errorf("specHash %q: want 16 hex characters", h)
	}
	changed := map[string]func(*v1alpha1.Proxy){
		"provider":        func(p *v1alpha1.Proxy) { p.Spec.Provider = "other" },
		"region":          func(p *v1alpha1.Proxy) { p.Spec.Placement.Region = "r2" },
		"zone":            func(p *v1alpha1.Proxy) { p.Spec.Placement.Zone = "z2" },
		"machine type":    func(p *v1alpha1.Proxy) { p.Spec.Placement.MachineType = "large" },
		"image":           func(p *v1alpha1.Proxy) { p.Spec.Placement.Image = "debian-13" },
		"port":            func(p *v1alpha1.Proxy) { p.Spec.Port = 8888 },
		"allowed clients": func(p *v1alpha1.Proxy) { p.Spec.AllowedClients = p.Spec.AllowedClients[:1] },
		"roll":            func(p *v1alpha1.Proxy) { p.Annotations = map[string]string{v1alpha1.RollAnnotation: "1"} },
		"egress": func(p *v1alpha1.Proxy) {
			p.Spec.Egress = &v1alpha1.Egress{Destinations: []v1alpha1.Destination{{Host: "api.partner.example"}}}
		},
	}
	for what, change := range changed {
		p := base.DeepCopy()
		change(p)
		if SpecHash(p, nil) == h {
			t.Errorf("a changed %s keeps the spec hash", what)
		}
	}
	user := []byte("#cloud-config\n")
	if SpecHash(base, user) == h || SpecHash(base, []byte{}) == h {
		t.Error("a user-supplied cloud-init (even an empty one) keeps the spec hash of the default")
	}
	if SpecHash(base, []byte("#cloud-config\n\n")) == SpecHash(base, user) {
		t.Error("a changed user-supplied cloud-init keeps the spec hash")
	}
	same := base.DeepCopy()
	same.Labels = map[string]string{"team": "a"}
	same.Annotations = map[string]string{"note": "x"}
	same.Spec.AllowedClients = []v1alpha1.CIDR{"10.2.0.0/16", "10.1.0.0/16"}
	if SpecHash(same, nil) != h {
		t.Error("labels, another annotation or the order of allowedClients changed the spec hash")
	}
}
