package replica

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// Replica 0 is made from the spec hash releases before replicas gave the
// Proxy (the values below are theirs, computed with v0.4's operator at
// 3d16f1d), whatever spec.replicas, the other replicas' pins, or a zones
// list whose first zone is the zone it had: an upgrade, or scaling, never
// replaces it. Every other replica has a VM name of its own.
func TestReplicaZeroKeepsTheSpecHashOfEarlierReleases(t *testing.T) {
	base := func() *v1alpha1.Proxy {
		return &v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "uid-1"},
			Spec: v1alpha1.ProxySpec{Provider: "mem", Placement: v1alpha1.Placement{Region: "r1", MachineType: "small", Image: "debian-12"}, Port: 3128}}
	}
	for _, tc := range []struct {
		name string
		edit func(*v1alpha1.Proxy)
		want string
	}{
		{"one replica", func(p *v1alpha1.Proxy) { p.Spec.Replicas = 1 }, "9b76e1f593e0776a"},
		{"replicas unset (stored before the field)", func(p *v1alpha1.Proxy) {}, "9b76e1f593e0776a"},
		{"three replicas", func(p *v1alpha1.Proxy) { p.Spec.Replicas = 3 }, "9b76e1f593e0776a"},
		{"a pin", func(p *v1alpha1.Proxy) {
			p.Spec.AddressPool, p.Spec.Addresses = "pool", []v1alpha1.IPv4{"198.51.100.7"}
		}, "3e86ebb2771048bb"},
		{"its pin and replica 1's", func(p *v1alpha1.Proxy) {
			p.Spec.Replicas, p.Spec.AddressPool, p.Spec.Addresses = 2, "pool", []v1alpha1.IPv4{"198.51.100.7", "198.51.100.8"}
		}, "3e86ebb2771048bb"},
		{"a pool and a zone", func(p *v1alpha1.Proxy) { p.Spec.AddressPool, p.Spec.Placement.Zone = "pool", "z1" }, "dffa46214439208e"},
		{"a pool and zones starting with that zone", func(p *v1alpha1.Proxy) {
			p.Spec.Replicas, p.Spec.AddressPool, p.Spec.Placement.Zones = 2, "pool", []string{"z1", "z2"}
		}, "dffa46214439208e"},
	} {
		p := base()
		tc.edit(p)
		if got := SpecHash(Spec(p, 0), nil); got != tc.want {
			t.Errorf("%s: replica 0's spec hash %s, want %s", tc.name, got, tc.want)
		}
	}
	p := base()
	p.Spec.Replicas, p.Spec.Placement.Zones = 3, []string{"z1", "z2"}
	names := map[string]int{}
	for k := range 3 {
		names[InstanceName(p, SpecHash(Spec(p, k), nil), k)] = k
	}
	if len(names) != 3 {
		t.Errorf("replica VM names %v are not distinct", names)
	}
	if a, b := Spec(p, 0).Spec.Placement.Zone, Spec(p, 2).Spec.Placement.Zone; a != "z1" || b != "z1" || Spec(p, 1).Spec.Placement.Zone != "z2" {
		t.Errorf("zones of replicas 0, 1, 2: %s %s %s", a, Spec(p, 1).Spec.Placement.Zone, b)
	}
	// A pin moves only its own replica.
	q := base()
	q.Spec.Replicas, q.Spec.AddressPool, q.Spec.Addresses = 2, "pool", []v1alpha1.IPv4{"198.51.100.7", "198.51.100.8"}
	r := q.DeepCopy()
	r.Spec.Addresses[1] = "198.51.100.9"
	if SpecHash(Spec(q, 0), nil) != SpecHash(Spec(r, 0), nil) || SpecHash(Spec(q, 1), nil) == SpecHash(Spec(r, 1), nil) {
		t.Error("changing replica 1's pin must replace replica 1 only")
	}
}

// Only a VM made from the default cloud-init this operator renders now
// serves the statistics page: one made by an older operator's template, or
// from the user's own cloud-init (even unchanged since), is asked for
// nothing it might forward to its upstream or count as a refusal.
func TestServesStatsOnlyTheCurrentDefaultCloudInit(t *testing.T) {
	const current = "sha256:now"
	defaults := &v1alpha1.Proxy{}
	own := &v1alpha1.Proxy{Spec: v1alpha1.ProxySpec{CloudInit: &corev1.SecretKeySelector{Key: "user-data"}}}
	for _, tc := range []struct {
		name    string
		proxy   *v1alpha1.Proxy
		hash    string
		current string
		want    bool
	}{
		{"default cloud-init, current", defaults, current, current, true},
		{"default cloud-init of an older template", defaults, "sha256:then", current, false},
		{"default cloud-init, nothing rendered", defaults, "", "", false},
		{"the user's cloud-init, unchanged", own, current, current, false},
		{"the user's cloud-init, changed", own, "sha256:then", current, false},
	} {
		ref := &v1alpha1.InstanceRef{CloudInitHash: tc.hash}
		if got := ServesStats(tc.proxy, ref, tc.current); got != tc.want {
			t.Errorf("%s: ServesStats = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Break-before-make is for a replacement: with both VMs and either on a
// static address, or on a provider that keeps the replica's egress
// address (the replacement would take it from the serving VM at its
// Create); never without a replacement, nor between two VMs of the
// provider's own addresses when it keeps none.
func TestBreaksBeforeMakeOnlyForAStaticReplacement(t *testing.T) {
	static := &v1alpha1.InstanceRef{Name: "a", Address: "198.51.100.7/24"}
	dynamic := &v1alpha1.InstanceRef{Name: "b"}
	for _, tc := range []struct {
		name                  string
		instance, replacement *v1alpha1.InstanceRef
		keepsEgress           bool
		want                  bool
	}{
		{"static, no replacement", static, nil, false, false},
		{"no instance, static replacement", nil, static, false, false},
		{"static to dynamic", static, dynamic, false, true},
		{"dynamic to static", dynamic, static, false, true},
		{"dynamic to dynamic", dynamic, dynamic, false, false},
		{"dynamic to dynamic, egress kept", dynamic, dynamic, true, true},
		{"egress kept, no replacement", dynamic, nil, true, false},
	} {
		p := &v1alpha1.Proxy{Status: v1alpha1.ProxyStatus{Instance: tc.instance, Replacement: tc.replacement}}
		if got := BreaksBeforeMake(p, 0, tc.keepsEgress); got != tc.want {
			t.Errorf("%s: BreaksBeforeMake = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Others names the VMs recorded for every replica but k, instance and
// replacement alike, and none of k's: a sweep of replica k spares them.
func TestOthersNamesEveryOtherReplicasVMs(t *testing.T) {
	ref := func(name string) *v1alpha1.InstanceRef { return &v1alpha1.InstanceRef{Name: name} }
	p := &v1alpha1.Proxy{Spec: v1alpha1.ProxySpec{Replicas: 3}, Status: v1alpha1.ProxyStatus{
		Instance: ref("a0"), Replacement: ref("b0"),
		Replicas: []v1alpha1.ReplicaStatus{{Index: 0}, {Index: 1, Instance: ref("a1")}, {Index: 2, Instance: ref("a2"), Replacement: ref("b2")}},
	}}
	for k, want := range map[int][]string{0: {"a1", "a2", "b2"}, 1: {"a0", "a2", "b0", "b2"}, 2: {"a0", "a1", "b0"}} {
		got := slices.Sorted(maps.Keys(Others(p, k)))
		if !slices.Equal(got, want) {
			t.Errorf("Others(%d) = %v, want %v", k, got, want)
		}
	}
}
