package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/addresses"
)

// The tests of spec.replicas: N VMs, one static address each, spread over
// placement.zones, rolled one at a time, each recreated on its address.

// threeReplicas has a Proxy run three replicas with addresses of pool.
func threeReplicas(pool string) func(*v1alpha1.Proxy) {
	return func(p *v1alpha1.Proxy) { p.Spec.Replicas, p.Spec.AddressPool = 3, pool }
}

// playGuests plays the guest of every VM of the Proxy until the test ends:
// each VM the Proxy's status records reports the static address it was
// given, as cloud-init makes it. While a test holds guard, no guest boots.
func playGuests(t *testing.T, p *v1alpha1.Proxy) (guard *sync.Mutex) {
	t.Helper()
	entry, _ := set.Get(testProvider)
	ctx, cancel := context.WithCancel(context.Background())
	guard = &sync.Mutex{}
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			guard.Lock()
			var got v1alpha1.Proxy
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), &got); err == nil {
				s := got.Status
				refs := []*v1alpha1.InstanceRef{s.Instance, s.Replacement}
				for _, r := range s.Replicas {
					refs = append(refs, r.Instance, r.Replacement)
				}
				for _, ref := range refs {
					if ref == nil || ref.ProviderID == "" {
						continue
					}
					inst, err := entry.Provider.Get(ctx, ref.ProviderID)
					if err != nil || inst.State != contract.StateProvisioning {
						continue
					}
					if n, err := control.DeliveredNetwork(ctx, ref.ProviderID); err == nil && n.Address.IsValid() {
						_ = control.ReportIP(ctx, ref.ProviderID, n.IP())
					}
				}
			}
			guard.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return guard
}

// twoServing makes a Proxy of two replicas on a pool of its own, with
// their guests played, and waits until both serve; it returns the Proxy
// and its Ready copy.
func twoServing(t *testing.T, name string, addrs v1alpha1.PoolAddresses) (p, ready *v1alpha1.Proxy) {
	t.Helper()
	newPool(t, name, addrs)
	p = newProxy(t, name, func(p *v1alpha1.Proxy) { p.Spec.Replicas, p.Spec.AddressPool = 2, name })
	playGuests(t, p)
	return p, readyN(t, p, 2)
}

// replicaOf returns replica k's entry of the status.
func replicaOf(s *v1alpha1.ProxyStatus, k int) v1alpha1.ReplicaStatus {
	for _, r := range s.Replicas {
		if int(r.Index) == k {
			return r
		}
	}
	return v1alpha1.ReplicaStatus{Index: int32(k)}
}

// endpointsOf lists the addresses every EndpointSlice of the Proxy's
// Service holds, by port.
func endpointsOf(t *testing.T, p *v1alpha1.Proxy) map[int32][]string {
	t.Helper()
	var list discoveryv1.EndpointSliceList
	if err := k8s.List(context.Background(), &list, client.InNamespace(p.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: p.Name}); err != nil {
		t.Fatal(err)
	}
	out := map[int32][]string{}
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			out[*s.Ports[0].Port] = append(out[*s.Ports[0].Port], e.Addresses...)
		}
	}
	for _, ips := range out {
		slices.Sort(ips)
	}
	return out
}

// allEndpoints is every address of endpointsOf, sorted.
func allEndpoints(t *testing.T, p *v1alpha1.Proxy) []string {
	t.Helper()
	var out []string
	for _, ips := range endpointsOf(t, p) {
		out = append(out, ips...)
	}
	slices.Sort(out)
	return out
}

// readyN waits until n replicas of the Proxy answer, none being replaced.
func readyN(t *testing.T, p *v1alpha1.Proxy, n int) *v1alpha1.Proxy {
	t.Helper()
	var got *v1alpha1.Proxy
	eventually(t, fmt.Sprintf("%s is %d/%d", p.Name, n, n), func() bool {
		got = get(t, p)
		s := got.Status
		if s.Ready != fmt.Sprintf("%d/%d", n, n) || len(s.Replicas) != n {
			return false
		}
		for _, r := range s.Replicas {
			if r.Replacement != nil {
				return false
			}
		}
		return true
	})
	return got
}

// replicaAddresses maps each replica's index to its address.
func replicaAddresses(p *v1alpha1.Proxy) map[int32]string {
	out := map[int32]string{}
	for _, r := range p.Status.Replicas {
		out[r.Index] = r.Address
	}
	return out
}

// degradedCondition returns the Proxy's Degraded condition.
func degradedCondition(p *v1alpha1.Proxy) metav1.Condition {
	return proxyCondition(p, v1alpha1.ConditionDegraded)
}

func TestReplicasSpreadEachOnItsOwnAddress(t *testing.T) {
	newPool(t, "rep-spread", "198.51.100.130-198.51.100.133")
	p := newProxy(t, "rep-spread", func(p *v1alpha1.Proxy) {
		threeReplicas("rep-spread")(p)
		p.Spec.Placement.Zones = []string{testZonePrefix + "a", testZonePrefix + "b"}
	})
	playGuests(t, p)
	got := readyN(t, p, 3)
	s := got.Status

	if c := readyCondition(got); c.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v", c)
	}
	if c := degradedCondition(got); c.Status != metav1.ConditionFalse {
		t.Errorf("Degraded %+v, want False", c)
	}
	if s.ReadyReplicas != 3 || got.Status.Phase != v1alpha1.PhaseReady {
		t.Errorf("readyReplicas %d phase %s", s.ReadyReplicas, s.Phase)
	}
	pool, _ := addresses.Parse(&v1alpha1.AddressPoolSpec{Addresses: []v1alpha1.PoolAddresses{"198.51.100.130-198.51.100.133"}, Prefix: 24, Gateway: "198.51.100.1"})
	var ips, ids []string
	for k := range 3 {
		r := replicaOf(&s, k)
		if !r.Ready || r.Instance == nil || r.Instance.ProviderID == "" {
			t.Fatalf("replica %d: %+v", k, r)
		}
		if a, err := netip.ParseAddr(r.Address); err != nil || !pool.Contains(a) || r.Instance.IP != r.Address {
			t.Errorf("replica %d answers at %q (VM %q), not an address of the pool", k, r.Address, r.Instance.IP)
		}
		ips, ids = append(ips, r.Address), append(ids, r.Instance.ProviderID)
		v, _ := createRequests.Load(r.Instance.Name)
		req, _ := v.(contract.CreateRequest)
		if want := []string{"a", "b", "a"}[k]; req.Placement.Zone != testZonePrefix+want {
			t.Errorf("replica %d made in zone %q, want %s", k, req.Placement.Zone, testZonePrefix+want)
		}
		if req.Network == nil || req.Network.IP() != r.Address {
			t.Errorf("replica %d made with network %v, want its address %s", k, req.Network, r.Address)
		}
		// What a provider keeps per replica (an egress address) is keyed
		// by it (contract §3.1).
		if req.Replica != int32(k) {
			t.Errorf("replica %d made with CreateRequest.Replica %d", k, req.Replica)
		}
	}
	if slices.Sort(ips); len(slices.Compact(slices.Clone(ips))) != 3 {
		t.Errorf("replicas' addresses %v are not distinct", ips)
	}
	if slices.Sort(ids); len(slices.Compact(slices.Clone(ids))) != 3 {
		t.Errorf("replicas' VMs %v are not distinct", ids)
	}
	if sorted := slices.Sorted(slices.Values(s.Addresses)); !slices.Equal(sorted, ips) {
		t.Errorf("status.addresses %v, want the replicas' %v", s.Addresses, ips)
	}
	if n := len(instancesOf(t, p)); n != 3 {
		t.Errorf("%d VMs, want 3", n)
	}
	byReplica := map[int32]string{}
	for _, pa := range addressesOf(t, "rep-spread") {
		byReplica[pa.Spec.Replica] = addresses.IPOf(pa.Spec.Address)
	}
	if fmt.Sprint(byReplica) != fmt.Sprint(replicaAddresses(got)) {
		t.Errorf("ProxyAddresses by replica %v, status %v", byReplica, replicaAddresses(got))
	}
	eventually(t, "the EndpointSlice lists the 3 replicas", func() bool {
		return fmt.Sprint(endpointsOf(t, p)) == fmt.Sprint(map[int32][]string{3128: ips})
	})
	// status.address is replica 0's: the address a single-replica Proxy
	// had, which the printer column and a scale to one keep.
	if first := replicaOf(&s, 0).Address; s.Address != first {
		t.Errorf("status.address %s, want replica 0's %s", s.Address, first)
	}
	for k := range 3 {
		want := fmt.Sprintf("%s: replica %d answers at %s:3128", v1alpha1.ReasonReady, k, replicaOf(&s, k).Address)
		eventually(t, "event "+want, func() bool { return slices.Contains(eventsFor(t, p), want) })
	}
}

// A spec change replaces the replicas one at a time, each on its own
// address (break-before-make per replica): whenever a replacement is
// made, the other replicas answer and are the Service's endpoints.
func TestReplicasRollOneAtATimeKeepingTheirAddresses(t *testing.T) {
	newPool(t, "rep-roll", "198.51.100.140-198.51.100.142")
	p := newProxy(t, "rep-roll", threeReplicas("rep-roll"))
	guests := playGuests(t, p)
	before := readyN(t, p, 3)
	addrs := replicaAddresses(before)
	oldIDs := map[int32]string{}
	for _, r := range before.Status.Replicas {
		oldIDs[r.Index] = r.Instance.ProviderID
	}

	// Watch every step the API server shows until the roll ends.
	var mu sync.Mutex
	var violations []string
	steps := 0
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			var got v1alpha1.Proxy
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), &got); err == nil {
				var down []string
				for _, r := range got.Status.Replicas {
					if !r.Ready {
						down = append(down, fmt.Sprintf("%d (%s: %s)", r.Index, r.Reason, r.Message))
					} else if r.Address != addrs[r.Index] {
						mu.Lock()
						violations = append(violations, fmt.Sprintf("replica %d answers at %s, not its %s", r.Index, r.Address, addrs[r.Index]))
						mu.Unlock()
					}
				}
				mu.Lock()
				steps++
				if len(down) > 1 {
					violations = append(violations, fmt.Sprintf("replicas %v do not answer at once", down))
				}
				mu.Unlock()
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	stop := func() { cancel(); wg.Wait() }
	defer stop()

	// Every replacement's Create is held, one at a time: the next hold is
	// in place before the guest of the one released boots, and so before
	// the next replacement can start (a replica answers only once its
	// guest booted).
	held, release := holdCreates(t, "rep-roll")
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Port = 3129 })
	seen := map[int32]bool{}
	for i := range 3 {
		inst := heldCreate(t, held, "no Create of a replacement")
		got := get(t, p)
		var k int32 = -1
		for _, r := range got.Status.Replicas {
			if r.Instance != nil && r.Instance.Name == inst.Name {
				k = r.Index
			}
		}
		if k < 0 || seen[k] {
			t.Fatalf("Create of %s: not a replica still to replace (%v)", inst.Name, seen)
		}
		seen[k] = true
		// The old VM is gone before its replacement is made on its address.
		entry, _ := set.Get(testProvider)
		if _, err := entry.Provider.Get(context.Background(), oldIDs[k]); err == nil {
			t.Errorf("replica %d's old VM %s still exists while its replacement is made", k, oldIDs[k])
		}
		var others []string
		for j, a := range addrs {
			if j != k {
				others = append(others, a)
			}
		}
		slices.Sort(others)
		eventually(t, fmt.Sprintf("while replica %d is made, the others answer and are the only endpoints", k), func() bool {
			got := get(t, p)
			for _, r := range got.Status.Replicas {
				if r.Index != k && !r.Ready {
					return false
				}
			}
			return fmt.Sprint(allEndpoints(t, p)) == fmt.Sprint(others)
		})
		guests.Lock()
		release(nil)
		if i < 2 {
			held, release = holdCreates(t, "rep-roll")
		}
		guests.Unlock()
		eventually(t, fmt.Sprintf("replica %d answers again", k), func() bool {
			r := replicaOf(&get(t, p).Status, int(k))
			return r.Ready && r.Instance != nil && r.Instance.Port == 3129
		})
	}
	after := readyN(t, p, 3)
	stop()
	mu.Lock()
	defer mu.Unlock()
	if len(violations) > 0 {
		t.Errorf("%d of %d observed steps broke the roll: %s", len(violations), steps, strings.Join(slices.Compact(violations), "; "))
	}
	for _, r := range after.Status.Replicas {
		if r.Address != addrs[r.Index] || r.Instance.ProviderID == oldIDs[r.Index] || r.Instance.Port != 3129 {
			t.Errorf("replica %d after the roll: address %s (was %s), VM %s (was %s), port %d",
				r.Index, r.Address, addrs[r.Index], r.Instance.ProviderID, oldIDs[r.Index], r.Instance.Port)
		}
	}
	var ips []string
	for _, a := range addrs {
		ips = append(ips, a)
	}
	slices.Sort(ips)
	eventually(t, "the EndpointSlice lists the 3 replicas on the new port only", func() bool {
		return fmt.Sprint(endpointsOf(t, p)) == fmt.Sprint(map[int32][]string{3129: ips})
	})
	if n := len(addressesOf(t, "rep-roll")); n != 3 {
		t.Errorf("%d ProxyAddresses after the roll, want 3", n)
	}
}

// A replica whose VM is lost behind the operator's back leaves the Proxy
// Ready and Degraded, naming it; it is made again on its own address.
func TestLostReplicaIsDegradedAndRecreatedOnItsAddress(t *testing.T) {
	newPool(t, "rep-lost", "198.51.100.150-198.51.100.152")
	p := newProxy(t, "rep-lost", threeReplicas("rep-lost"))
	playGuests(t, p)
	before := replicaOf(&readyN(t, p, 3).Status, 1)
	held, release := holdCreates(t, "rep-lost")
	entry, _ := set.Get(testProvider)
	if err := entry.Provider.Delete(context.Background(), before.Instance.ProviderID); err != nil {
		t.Fatal(err)
	}
	inst := heldCreate(t, held, "the lost VM is not made again")
	eventually(t, "Degraded names replica 1 while it is made again", func() bool {
		got := get(t, p)
		c := degradedCondition(got)
		return c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "replica 1 (") &&
			!strings.Contains(c.Message, "replica 0") && !strings.Contains(c.Message, "replica 2") &&
			readyCondition(got).Status == metav1.ConditionTrue && got.Status.Ready == "2/3"
	})
	var others []string
	for k, a := range replicaAddresses(get(t, p)) {
		if k != 1 {
			others = append(others, a)
		}
	}
	slices.Sort(others)
	eventually(t, "the Service sends clients to the two others only", func() bool {
		return len(others) == 2 && fmt.Sprint(allEndpoints(t, p)) == fmt.Sprint(others)
	})
	v, _ := createRequests.Load(inst.Name)
	if req, _ := v.(contract.CreateRequest); req.Network == nil || req.Network.IP() != before.Address {
		t.Errorf("replica 1 made again with network %v, want its address %s", req.Network, before.Address)
	}
	release(nil)
	got := readyN(t, p, 3)
	after := replicaOf(&got.Status, 1)
	// The backend names the VM again as before (a deterministic name): the
	// held Create above is what shows it was made again.
	if after.Address != before.Address || after.Instance.IP != before.Address {
		t.Errorf("replica 1 after the loss: %s at %s, was at %s", after.Instance.ProviderID, after.Address, before.Address)
	}
	if c := degradedCondition(got); c.Status != metav1.ConditionFalse {
		t.Errorf("Degraded %+v once all answer", c)
	}
}

// A replica whose operation runs does not keep the replicas after it from
// being stepped: replica 1 is made and serves while replica 0's Create is
// still held. The loop over the replicas skips a running lane; stopping
// at it would leave replica 1 unmade until replica 0's Create ended.
func TestARunningReplicaDoesNotHoldBackTheNext(t *testing.T) {
	const name = "rep-next"
	newPool(t, name, "198.51.100.180-198.51.100.181")
	held, release := holdCreates(t, name)
	p := newProxy(t, name, func(p *v1alpha1.Proxy) { p.Spec.AddressPool = name })
	playGuests(t, p)
	first := heldCreate(t, held, "replica 0's Create was never held")
	narrowHold(first.Name)
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Replicas = 2 })
	eventually(t, "replica 1 serves while replica 0's Create is held", func() bool {
		s := get(t, p).Status
		return s.Ready == "1/2" && replicaOf(&s, 1).Ready && !replicaOf(&s, 0).Ready
	})
	release(nil)
	readyN(t, p, 2)
}

// A removed replica whose operation runs does not keep the removal of the
// others from going on: scaled from 3 to 1 while replica 2's Create is
// held, replica 1's VM is deleted and its entry dropped meanwhile. The loop
// over the removed replicas skips a running lane; stopping at it (the
// highest comes first) would leave replica 1 until replica 2's Create ended.
func TestARunningReplicaDoesNotHoldBackTheRemovalOfAnother(t *testing.T) {
	const name = "rep-skip"
	p, ready := twoServing(t, name, "198.51.100.192-198.51.100.194")
	second := replicaOf(&ready.Status, 1)
	held, release := holdCreates(t, name)
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Replicas = 3 })
	third := heldCreate(t, held, "replica 2's Create was never held")
	narrowHold(third.Name)
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Replicas = 1 })
	eventually(t, "replica 1 is removed while replica 2's Create is held", func() bool {
		for _, inst := range instancesOf(t, p) {
			if inst.ProviderID == second.Instance.ProviderID {
				return false
			}
		}
		s := get(t, p).Status
		return len(s.Replicas) == 2 && replicaOf(&s, 2).Instance != nil
	})
	release(nil)
	readyN(t, p, 1)
	if n := len(instancesOf(t, p)); n != 1 {
		t.Errorf("%d VMs after scaling down to 1", n)
	}
}

// A removed replica's VM whose Delete fails is announced, and deleted on
// a later try; its address is released only then.
func TestScaleDownDeleteFailureIsAnnouncedAndRetried(t *testing.T) {
	const name = "rep-fail"
	p, _ := twoServing(t, name, "198.51.100.195-198.51.100.196")
	if err := control.FailNext(contracttest.OpDelete, nil); err != nil {
		t.Fatal(err)
	}
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Replicas = 1 })
	eventually(t, "a warning that the removed replica's VM could not be deleted", func() bool {
		return slices.ContainsFunc(eventsFor(t, p), func(e string) bool {
			return strings.HasPrefix(e, "DeleteFailed: ") && strings.Contains(e, "deleting the VMs of removed replica 1") &&
				strings.Contains(e, "the service is temporarily unavailable")
		})
	})
	readyN(t, p, 1)
	eventually(t, "replica 1's address is released", func() bool { return len(addressesOf(t, name)) == 1 })
	// One warning: the Delete that worked is not announced as failed.
	if n := len(slices.DeleteFunc(eventsFor(t, p), func(e string) bool { return !strings.HasPrefix(e, "DeleteFailed: ") })); n != 1 {
		t.Errorf("%d DeleteFailed events, want 1: %q", n, eventsFor(t, p))
	}
	if n := len(instancesOf(t, p)); n != 1 {
		t.Errorf("%d VMs after scaling down to 1, want the retried Delete to have removed replica 1's", n)
	}
}

// A replica the pool has no address for says so in its entry, and
// Degraded names it, while the others serve; it is made once an address
// is free.
func TestReplicaWithoutAnAddressSaysWhy(t *testing.T) {
	const name = "rep-wait"
	pool := newPool(t, name, "198.51.100.203")
	p := newProxy(t, name, func(p *v1alpha1.Proxy) { p.Spec.Replicas, p.Spec.AddressPool = 2, name })
	playGuests(t, p)
	eventually(t, "replica 1 waits for an address while replica 0 serves", func() bool {
		s := get(t, p).Status
		r := replicaOf(&s, 1)
		return s.Ready == "1/2" && r.Reason == v1alpha1.ReasonPoolExhausted && r.Instance == nil &&
			strings.Contains(meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionDegraded).Message, "replica 1 ("+v1alpha1.ReasonPoolExhausted+")")
	})
	var latest v1alpha1.AddressPool
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pool), &latest); err != nil {
		t.Fatal(err)
	}
	latest.Spec.Addresses = append(latest.Spec.Addresses, "198.51.100.204")
	if err := k8s.Update(context.Background(), &latest); err != nil {
		t.Fatal(err)
	}
	readyN(t, p, 2)
}

// Scaling down removes the highest replicas, and releases their addresses
// only once their VMs are gone.
func TestScaleDownReleasesAddressesAfterTheVMs(t *testing.T) {
	newPool(t, "rep-down", "198.51.100.160-198.51.100.162")
	p := newProxy(t, "rep-down", threeReplicas("rep-down"))
	playGuests(t, p)
	before := readyN(t, p, 3)
	keep := replicaOf(&before.Status, 0)
	open := holdDeletes(t)
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Replicas = 1 })
	eventually(t, "both removed replicas' VMs are being deleted, and the status says so", func() bool {
		s := get(t, p).Status
		return gatedDeletes.Load() >= 2 && s.Ready == "1/1" &&
			replicaOf(&s, 1).Reason == v1alpha1.ReasonRemoving && replicaOf(&s, 2).Reason == v1alpha1.ReasonRemoving
	})
	eventually(t, "the Service no longer sends clients to the removed replicas", func() bool {
		return fmt.Sprint(allEndpoints(t, p)) == fmt.Sprint([]string{keep.Address})
	})
	if n := len(addressesOf(t, "rep-down")); n != 3 {
		t.Fatalf("%d ProxyAddresses while the removed replicas' VMs still exist, want 3", n)
	}
	if n := len(instancesOf(t, p)); n != 3 {
		t.Fatalf("%d VMs while their Deletes are held, want 3", n)
	}
	open()
	eventually(t, "the removed replicas' addresses are released", func() bool {
		pas := addressesOf(t, "rep-down")
		return len(pas) == 1 && pas[0].Spec.Replica == 0 && addresses.IPOf(pas[0].Spec.Address) == keep.Address
	})
	got := readyN(t, p, 1)
	if got.Status.Instance.ProviderID != keep.Instance.ProviderID || fmt.Sprint(got.Status.Addresses) != fmt.Sprint([]string{keep.Address}) {
		t.Errorf("replica 0 after scaling down: %s %v, want %s %s", got.Status.Instance.ProviderID, got.Status.Addresses, keep.Instance.ProviderID, keep.Address)
	}
	if n := len(instancesOf(t, p)); n != 1 {
		t.Errorf("%d VMs after scaling down to 1", n)
	}
	if c := degradedCondition(got); c.Status != metav1.ConditionFalse || got.Status.Phase != v1alpha1.PhaseReady {
		t.Errorf("after scaling down: Degraded %+v, phase %s", c, got.Status.Phase)
	}
}

// A Proxy a release before replicas made (status.instance only) is
// adopted as replica 0: nothing is replaced, and scaling it up adds
// replicas beside its VM.
func TestProxyOfAnOldReleaseIsAdoptedWithoutReplacement(t *testing.T) {
	newPool(t, "rep-old", "198.51.100.170-198.51.100.171")
	p := newProxy(t, "rep-old", withPool("rep-old"))
	playGuests(t, p)
	first := waitReady(t, p).Status.Instance
	// What an older release wrote: no replicas, no count, no Degraded, no
	// port on the instance.
	if err := retryStatus(p, func(s *v1alpha1.ProxyStatus) {
		s.Replicas, s.ReadyReplicas, s.Ready = nil, 0, ""
		meta.RemoveStatusCondition(&s.Conditions, v1alpha1.ConditionDegraded)
		s.Instance.Port = 0
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the operator shows the adopted VM as replica 0", func() bool {
		s := get(t, p).Status
		r := replicaOf(&s, 0)
		return s.Ready == "1/1" && r.Ready && r.Instance != nil
	})
	got := get(t, p)
	if got.Status.Instance.ProviderID != first.ProviderID || got.Status.Instance.Name != first.Name || got.Status.Replacement != nil {
		t.Fatalf("adopting replaced the VM: instance %+v replacement %+v, was %+v", got.Status.Instance, got.Status.Replacement, first)
	}
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Replicas = 2 })
	got = readyN(t, p, 2)
	if got.Status.Instance.ProviderID != first.ProviderID {
		t.Errorf("scaling up replaced replica 0: %s, was %s", got.Status.Instance.ProviderID, first.ProviderID)
	}
	for _, e := range eventsFor(t, p) {
		if strings.HasPrefix(e, v1alpha1.ReasonReplacing+":") {
			t.Errorf("event %q", e)
		}
	}
	if n := len(instancesOf(t, p)); n != 2 {
		t.Errorf("%d VMs, want 2", n)
	}
}

// retryStatus rewrites the Proxy's status as mutate says, on its latest
// copy.
func retryStatus(p *v1alpha1.Proxy, mutate func(*v1alpha1.ProxyStatus)) error {
	var err error
	for range 20 {
		var got v1alpha1.Proxy
		if err = k8s.Get(context.Background(), client.ObjectKeyFromObject(p), &got); err != nil {
			return err
		}
		mutate(&got.Status)
		if err = k8s.Status().Update(context.Background(), &got); err == nil {
			return nil
		}
	}
	return err
}

func TestReplicasValidationNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*v1alpha1.Proxy)
		want []string
	}{
		{"zone and zones", func(p *v1alpha1.Proxy) {
			p.Spec.Placement.Zone, p.Spec.Placement.Zones = "z1", []string{"z1", "z2"}
		}, []string{"spec.placement.zones", "zone and zones are mutually exclusive"}},
		{"more pins than replicas", func(p *v1alpha1.Proxy) {
			p.Spec.Replicas, p.Spec.AddressPool = 2, "any"
			p.Spec.Addresses = []v1alpha1.IPv4{"198.51.100.1", "198.51.100.2", "198.51.100.3"}
		}, []string{"spec.addresses", "at most spec.replicas"}},
		{"pins without replicas", func(p *v1alpha1.Proxy) {
			p.Spec.AddressPool = "any"
			p.Spec.Addresses = []v1alpha1.IPv4{"198.51.100.1", "198.51.100.2"}
		}, []string{"spec.addresses", "at most spec.replicas"}},
		{"too many replicas", func(p *v1alpha1.Proxy) { p.Spec.Replicas = 17 }, []string{"spec.replicas", "16"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Name: "rep-invalid", Namespace: testNamespace},
				Spec: v1alpha1.ProxySpec{Provider: testProvider, Port: 3128}}
			tc.edit(p)
			err := k8s.Create(context.Background(), p)
			if err == nil {
				deleteProxy(t, p)
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	// Within the bounds it is accepted: as many pins as replicas.
	p := &v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Name: "rep-valid", Namespace: testNamespace},
		Spec: v1alpha1.ProxySpec{Provider: testProvider, Port: 3128, Replicas: 2, AddressPool: "any",
			Addresses: []v1alpha1.IPv4{"198.51.100.1", "198.51.100.2"}}}
	if err := k8s.Create(context.Background(), p, client.DryRunAll); err != nil {
		t.Errorf("two pins for two replicas: %v", err)
	}
}

// A serving VM found stopped leaves the Service before it is deleted: on
// a backend whose Delete is slow (a vSphere power-off and destroy), the
// Service would otherwise send clients to a dead VM for as long as the
// Delete takes (docs/addresses.md, "Failover"). The replica is made
// again once the Delete ends.
func TestStoppedServingVMLeavesTheServiceBeforeItsDelete(t *testing.T) {
	p, ready := twoServing(t, "stop-first", "198.51.100.176-198.51.100.177")
	live, dead := replicaOf(&ready.Status, 0), replicaOf(&ready.Status, 1)
	open := holdDeletes(t)
	stopVM(t, dead.Instance.ProviderID)
	eventually(t, "the stopped VM leaves the Service while no Delete has ended", func() bool {
		return fmt.Sprint(allEndpoints(t, p)) == fmt.Sprint([]string{live.Address})
	})
	if n := len(instancesOf(t, p)); n != 2 {
		t.Fatalf("%d VMs while the Deletes are held, want 2 (the stopped one not deleted yet)", n)
	}
	eventually(t, "the stopped VM's Delete starts once it is out of the Service", func() bool { return gatedDeletes.Load() >= 1 })
	open()
	eventually(t, "the stopped VM is deleted and replica 1 made again", func() bool {
		return slices.ContainsFunc(eventsFor(t, p), func(e string) bool { return strings.HasPrefix(e, v1alpha1.ReasonInstanceGone+":") })
	})
	readyN(t, p, 2)
}
