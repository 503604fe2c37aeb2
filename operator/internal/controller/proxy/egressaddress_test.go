package proxy

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest/memprovider"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// egressProvider is the suite's entry whose provider keeps an egress
// address per replica (memprovider's Config.Egress, as OpenStack's
// floating IPs), on the suite's Cloud, with the suite's seams.
const egressProvider = "mem-egress"

func egressEntry(tp trace.TracerProvider) (*providers.Entry, error) {
	prov, err := memprovider.New(memprovider.Config{
		Token: testToken, Regions: []string{"r1"},
		MachineTypes: map[string]memprovider.MachineType{"small": {CPUs: 1, MemoryMiB: 512}},
		Images:       map[string]string{"debian-12": "debian-12-proxy"},
		CallTimeout:  2 * time.Second,
		Egress:       true,
	}, cloud)
	if err != nil {
		return nil, err
	}
	return &providers.Entry{
		Name: egressProvider, Type: memprovider.Type, Owner: "c0ffee12-" + egressProvider,
		Provider:      providers.Instrument(egressProvider, memprovider.Type, providers.Limit(&seamProvider{Provider: prov, holder: holder}, providers.Limits{QPS: 1000, Burst: 1000, Concurrency: 8}), tp),
		GC:            providers.GC{MinAge: time.Hour, Interval: time.Hour},
		CheckInterval: time.Hour,
	}, nil
}

// egressProxy makes a Proxy of two replicas on the egress entry, its VMs'
// own addresses drawn from a pool of that entry.
func egressProxy(t *testing.T, name string, addrs v1alpha1.PoolAddresses) *v1alpha1.Proxy {
	t.Helper()
	pool := &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.AddressPoolSpec{
			Provider: egressProvider, Addresses: []v1alpha1.PoolAddresses{addrs}, Prefix: 24,
			Gateway: "198.51.100.1", DNS: []v1alpha1.IPv4{"198.51.100.53"},
		},
	}
	if err := k8s.Create(context.Background(), pool); err != nil {
		t.Fatalf("create AddressPool %s: %v", name, err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pool) })
	p := newProxy(t, name, func(p *v1alpha1.Proxy) {
		p.Spec.Provider, p.Spec.Replicas, p.Spec.AddressPool = egressProvider, 2, name
	})
	playGuests(t, p)
	return p
}

// keptEgress lists the egress addresses the egress entry keeps for p.
func keptEgress(t *testing.T, p *v1alpha1.Proxy) []contract.Egress {
	t.Helper()
	entry, _ := set.Get(egressProvider)
	all, err := entry.Provider.(contract.EgressKeeper).ListEgress(context.Background(), entry.Owner)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(all, func(e contract.Egress) bool { return e.UID != string(p.UID) })
}

// A Proxy on a provider that keeps an egress address per replica shows
// each replica's (status.replicas[].egressAddress, status.egressAddresses),
// the addresses the provider keeps for it, and keeps exactly those across
// a change that replaces every VM.
func TestEgressAddressesShownAndKeptAcrossAReplacement(t *testing.T) {
	p := egressProxy(t, "egress-keep", "198.51.100.197-198.51.100.198")
	before := readyN(t, p, 2)
	shown := before.Status.EgressAddresses
	kept := keptEgress(t, p)
	if len(shown) != 2 || shown[0] == shown[1] || len(kept) != 2 {
		t.Fatalf("status.egressAddresses %q, the provider keeps %v; want two addresses, one per replica", shown, kept)
	}
	for _, e := range kept {
		if r := replicaOf(&before.Status, int(e.Replica)); r.EgressAddress != e.IP || r.Instance.EgressIP != e.IP || shown[e.Replica] != e.IP {
			t.Errorf("replica %d shows egress address %q (instance %q, list %q); the provider keeps %s for it", e.Replica, r.EgressAddress, r.Instance.EgressIP, shown, e.IP)
		}
	}
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Port = 3129 })
	var after *v1alpha1.Proxy
	eventually(t, "both replicas serve on new VMs", func() bool {
		after = readyN(t, p, 2)
		return replicaOf(&after.Status, 0).Instance.ProviderID != replicaOf(&before.Status, 0).Instance.ProviderID &&
			replicaOf(&after.Status, 1).Instance.ProviderID != replicaOf(&before.Status, 1).Instance.ProviderID
	})
	if !slices.Equal(after.Status.EgressAddresses, shown) {
		t.Errorf("after the replacement: status.egressAddresses %q, want the same %q", after.Status.EgressAddresses, shown)
	}
	if got := keptEgress(t, p); len(got) != 2 {
		t.Errorf("after the replacement the provider keeps %v, want the same two", got)
	}
}

// The egress addresses go with the Proxy: a replica scaled away releases
// its own once its VMs are gone, and the Proxy's deletion releases the
// rest, each announced; the provider keeps none of them after.
func TestEgressAddressesReleasedWithTheirReplicaAndTheProxy(t *testing.T) {
	p := egressProxy(t, "egress-release", "198.51.100.201-198.51.100.202")
	before := readyN(t, p, 2)
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Replicas = 1 })
	readyN(t, p, 1)
	eventually(t, "replica 1's egress address is released, replica 0's kept", func() bool {
		kept := keptEgress(t, p)
		return len(kept) == 1 && kept[0].Replica == 0 && kept[0].IP == before.Status.EgressAddresses[0]
	})
	released := "EgressReleased: released egress address " + before.Status.EgressAddresses[1] + " of replica 1"
	eventually(t, "an event for replica 1's", func() bool { return slices.Contains(eventsFor(t, p), released) })
	deleteProxy(t, p)
	if kept := keptEgress(t, p); len(kept) != 0 {
		t.Errorf("after the Proxy's deletion the provider keeps %v, want none", kept)
	}
}

// On a provider that keeps the replica's egress address, a replacement is
// made only once the old VM is gone, even without a static address: made
// beside it, the new VM would take the address from the VM still serving,
// whose clients would then go out from another address. The replacement
// keeps the address.
func TestEgressKeptReplacementBreaksBeforeMake(t *testing.T) {
	const name = "egress-bbm"
	p := newProxy(t, name, func(p *v1alpha1.Proxy) { p.Spec.Provider = egressProvider })
	bootGuest(t, p, current)
	before := waitReady(t, p)
	if len(before.Status.EgressAddresses) != 1 {
		t.Fatalf("status.egressAddresses %q, want one", before.Status.EgressAddresses)
	}
	held, release := holdCreates(t, name)
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Port = 3129 })
	next := heldCreate(t, held, "the replacement's Create was never held")
	for _, inst := range instancesOf(t, p) {
		if inst.ProviderID == before.Status.Instance.ProviderID {
			t.Errorf("the replacement %s was made while the old VM %s still exists", next.Name, inst.ProviderID)
		}
	}
	release(nil)
	bootGuest(t, p, current)
	var after *v1alpha1.Proxy
	eventually(t, "the replacement serves", func() bool {
		after = get(t, p)
		return readyCondition(after).Status == metav1.ConditionTrue && after.Status.Instance.Name == next.Name
	})
	if !slices.Equal(after.Status.EgressAddresses, before.Status.EgressAddresses) {
		t.Errorf("after the replacement: status.egressAddresses %q, want %q", after.Status.EgressAddresses, before.Status.EgressAddresses)
	}
}
