package replica

import (
	"slices"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// Each replica's egress address is its serving VM's, or its replacement's
// while the replacement holds it (made break-before-make, it is the only
// VM); status.egressAddresses lists them by index, for the replicas wanted,
// and is empty when the provider keeps none.
func TestSummariseShowsTheReplicasEgressAddresses(t *testing.T) {
	ref := func(egress string) *v1alpha1.InstanceRef {
		return &v1alpha1.InstanceRef{Name: "vm", ProviderID: "r1/vm", IP: "10.0.0.5", EgressIP: egress}
	}
	p := &v1alpha1.Proxy{Spec: v1alpha1.ProxySpec{Replicas: 3}}
	p.Status.Instance = ref("203.0.113.10")
	p.Status.Replicas = []v1alpha1.ReplicaStatus{
		{Index: 0},
		{Index: 1, Replacement: ref("203.0.113.11")},
		{Index: 2, Instance: ref(""), Replacement: ref("")},
		{Index: 3, Instance: ref("203.0.113.13")}, // beyond spec.replicas: being removed
	}
	Summarise(p)
	for k, want := range []string{"203.0.113.10", "203.0.113.11", "", "203.0.113.13"} {
		if got := Slot(p, k).EgressAddress; got != want {
			t.Errorf("replica %d's egress address %q, want %q", k, got, want)
		}
	}
	if want := []string{"203.0.113.10", "203.0.113.11"}; !slices.Equal(p.Status.EgressAddresses, want) {
		t.Errorf("status.egressAddresses %q, want %q", p.Status.EgressAddresses, want)
	}

	none := &v1alpha1.Proxy{Spec: v1alpha1.ProxySpec{Replicas: 1}}
	none.Status.Instance = ref("")
	none.Status.EgressAddresses = []string{"203.0.113.99"}
	Summarise(none)
	if none.Status.EgressAddresses != nil || Slot(none, 0).EgressAddress != "" {
		t.Errorf("a provider that keeps no egress address: %q, replica 0 %q; want none", none.Status.EgressAddresses, Slot(none, 0).EgressAddress)
	}
}
