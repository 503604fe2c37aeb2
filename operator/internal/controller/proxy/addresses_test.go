package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/addresses"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller/gc"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controllertest"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metrics"
)

// newPool creates an AddressPool on the test provider, on 198.51.100.0/24
// (gateway .1), handing out addresses.
func newPool(t *testing.T, name string, addresses ...v1alpha1.PoolAddresses) *v1alpha1.AddressPool {
	t.Helper()
	pool := &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.AddressPoolSpec{
			Provider: testProvider, Addresses: addresses, Prefix: 24,
			Gateway: "198.51.100.1", DNS: []v1alpha1.IPv4{"198.51.100.53"},
		},
	}
	if err := k8s.Create(context.Background(), pool); err != nil {
		t.Fatalf("create AddressPool %s: %v", name, err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pool) })
	return pool
}

// withPool has a Proxy take its address from pool, pinned to pinned when
// given.
func withPool(pool string, pinned ...v1alpha1.IPv4) func(*v1alpha1.Proxy) {
	return func(p *v1alpha1.Proxy) { p.Spec.AddressPool, p.Spec.Addresses = pool, pinned }
}

// addressesOf lists the ProxyAddresses of a pool.
func addressesOf(t *testing.T, pool string) []v1alpha1.ProxyAddress {
	t.Helper()
	var list v1alpha1.ProxyAddressList
	if err := k8s.List(context.Background(), &list, client.MatchingLabels{v1alpha1.LabelPool: pool}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// allocated waits until the Proxy shows an allocated address and returns
// it.
func allocated(t *testing.T, p *v1alpha1.Proxy) string {
	t.Helper()
	var ip string
	eventually(t, p.Name+" has an address in its status", func() bool {
		if a := get(t, p).Status.Addresses; len(a) == 1 {
			ip = a[0]
			return true
		}
		return false
	})
	return ip
}

// addressCondition returns the Proxy's AddressesAllocated condition.
func addressCondition(p *v1alpha1.Proxy) metav1.Condition {
	return proxyCondition(p, v1alpha1.ConditionAddressesAllocated)
}

func TestAddressIsInStatusBeforeTheVMAndDelivered(t *testing.T) {
	newPool(t, "early", "198.51.100.10-198.51.100.12")
	held, release := holdCreates(t, "addr-early")
	p := newProxy(t, "addr-early", withPool("early"))
	inst := heldCreate(t, held, "no Create")
	// The VM's Create has not returned: the status already names the address.
	got := get(t, p)
	if want := []string{"198.51.100.10"}; fmt.Sprint(got.Status.Addresses) != fmt.Sprint(want) {
		t.Errorf("status.addresses %v while the VM is being made, want %v", got.Status.Addresses, want)
	}
	if c := addressCondition(got); c.Status != metav1.ConditionTrue {
		t.Errorf("AddressesAllocated %+v, want True", c)
	}
	v, _ := createRequests.Load(inst.Name)
	req, _ := v.(contract.CreateRequest)
	want := contract.StaticNetwork{Address: netip.MustParsePrefix("198.51.100.10/24"), Gateway: netip.MustParseAddr("198.51.100.1"),
		DNS: []netip.Addr{netip.MustParseAddr("198.51.100.53")}}
	if req.Network == nil || fmt.Sprint(*req.Network) != fmt.Sprint(want) {
		t.Errorf("CreateRequest.Network %v, want %v", req.Network, want)
	}
	// What the guest is given, read from the backend (the memory Cloud's
	// control, contracttest.NetworkReader).
	if got, err := control.DeliveredNetwork(context.Background(), inst.ProviderID); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("delivered network %v (%v), want %v", got, err, want)
	}
	pas := addressesOf(t, "early")
	if len(pas) != 1 || pas[0].Name != "mem-198-51-100-10" || pas[0].Spec.Proxy.UID != string(got.UID) {
		t.Errorf("ProxyAddresses %+v, want early-198-51-100-10 held by the Proxy", pas)
	}
	release(nil)
	bootGuestAt(t, p, current, "198.51.100.10")
	if got := waitReady(t, p); got.Status.Address != "198.51.100.10" {
		t.Errorf("status.address %q, want the allocated 198.51.100.10", got.Status.Address)
	}
}

// A provider reporting another address than the allocated one (breaking
// contract §2.2: a DHCP lease, say) never makes the Proxy Ready.
func TestAnotherAddressIsNotReady(t *testing.T) {
	newPool(t, "dhcp", "198.51.100.20")
	p := newProxy(t, "addr-dhcp", withPool("dhcp"))
	var id string
	eventually(t, "the instance is created", func() bool {
		ref := get(t, p).Status.Instance
		if ref != nil && ref.ProviderID != "" {
			id = ref.ProviderID
			return true
		}
		return false
	})
	misreported.Store(id, "192.0.2.250")
	defer misreported.Delete(id)
	bootGuestAt(t, p, current, "198.51.100.20")
	eventually(t, "the Proxy says which address it waits for", func() bool {
		return strings.Contains(readyCondition(get(t, p)).Message, `reports address "192.0.2.250"; waiting for the allocated 198.51.100.20`)
	})
	if got := get(t, p); got.Status.Phase == v1alpha1.PhaseReady {
		t.Fatalf("Ready at %s, not the allocated address", got.Status.Address)
	}
	misreported.Delete(id)
	if got := waitReady(t, p); got.Status.Address != "198.51.100.20" {
		t.Errorf("status.address %q", got.Status.Address)
	}
}

func TestPoolExhaustionWaitsAndClearsWhenAnAddressIsFreed(t *testing.T) {
	newPool(t, "small", "198.51.100.30-198.51.100.31")
	a := newProxy(t, "addr-full-a", withPool("small"))
	b := newProxy(t, "addr-full-b", withPool("small"))
	allocated(t, a)
	allocated(t, b)
	c := newProxy(t, "addr-full-c", withPool("small"))
	eventually(t, "the third Proxy says the pool is exhausted", func() bool {
		got := get(t, c)
		cond := addressCondition(got)
		return cond.Status == metav1.ConditionFalse && cond.Reason == v1alpha1.ReasonPoolExhausted &&
			got.Status.Phase == v1alpha1.PhasePending && readyCondition(got).Reason == v1alpha1.ReasonPoolExhausted
	})
	if n := len(addressesOf(t, "small")); n != 2 {
		t.Fatalf("%d ProxyAddresses in a pool of 2", n)
	}
	if got := get(t, c); got.Status.Instance != nil || len(got.Status.Addresses) != 0 {
		t.Fatalf("an exhausted pool made an instance or an address: %+v", got.Status)
	}
	freed := get(t, a).Status.Addresses[0]
	deleteProxy(t, a)
	if got := allocated(t, c); got != freed {
		t.Errorf("the waiting Proxy got %s, want the freed %s", got, freed)
	}
	eventually(t, "AddressesAllocated is True", func() bool {
		return addressCondition(get(t, c)).Status == metav1.ConditionTrue
	})
}

func TestReplacementKeepsTheAddressBreakBeforeMake(t *testing.T) {
	newPool(t, "keep", "198.51.100.40")
	p := newProxy(t, "addr-keep", withPool("keep"))
	ip := allocated(t, p)
	bootGuestAt(t, p, current, ip)
	first := waitReady(t, p).Status.Instance
	held, release := holdCreates(t, "addr-keep")
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Port = 3129 })
	next := heldCreate(t, held, "no Create of the replacement")
	// The replacement is made only once the old VM is gone.
	entry, _ := set.Get(testProvider)
	if _, err := entry.Provider.Get(context.Background(), first.ProviderID); !errors.Is(err, contract.ErrNotFound) {
		t.Errorf("old instance %s still there (%v) while its replacement %s is made on its address", first.ProviderID, err, next.Name)
	}
	release(nil)
	bootGuestAt(t, p, func(s *v1alpha1.ProxyStatus) *v1alpha1.InstanceRef {
		if s.Instance != nil && s.Instance.ProviderID != first.ProviderID {
			return s.Instance
		}
		return nil
	}, ip)
	eventually(t, "the replacement serves", func() bool {
		got := get(t, p)
		return got.Status.Phase == v1alpha1.PhaseReady && got.Status.Instance.ProviderID != first.ProviderID
	})
	if got := get(t, p); got.Status.Address != ip || fmt.Sprint(got.Status.Addresses) != fmt.Sprint([]string{ip}) {
		t.Errorf("after the replacement: address %q addresses %v, want %s", got.Status.Address, got.Status.Addresses, ip)
	}
	if n := len(addressesOf(t, "keep")); n != 1 {
		t.Errorf("%d ProxyAddresses after the replacement, want 1", n)
	}
}

func TestPinnedAddressIsKeptAcrossRecreate(t *testing.T) {
	newPool(t, "pinned", "198.51.100.50-198.51.100.59")
	mk := func() *v1alpha1.Proxy { return newProxy(t, "addr-pinned", withPool("pinned", "198.51.100.57")) }
	p := mk()
	if ip := allocated(t, p); ip != "198.51.100.57" {
		t.Fatalf("pinned Proxy got %s", ip)
	}
	other := newProxy(t, "addr-pinned-other", withPool("pinned", "198.51.100.57"))
	eventually(t, "a second Proxy pinning the address is told it is taken", func() bool {
		c := addressCondition(get(t, other))
		return c.Reason == v1alpha1.ReasonAddressTaken && strings.Contains(c.Message, "held by Proxy default/addr-pinned")
	})
	deleteProxy(t, other)
	deleteProxy(t, p)
	p = mk()
	if ip := allocated(t, p); ip != "198.51.100.57" {
		t.Errorf("recreated pinned Proxy got %s, want 198.51.100.57", ip)
	}
}

func TestAddressIsReleasedOnlyAfterTheVMIsGone(t *testing.T) {
	newPool(t, "release", "198.51.100.60")
	p := newProxy(t, "addr-release", withPool("release"))
	ip := allocated(t, p)
	bootGuestAt(t, p, current, ip)
	waitReady(t, p)
	open := holdDeletes(t)
	if err := k8s.Delete(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Proxy is being deleted", func() bool { return get(t, p).Status.Phase == v1alpha1.PhaseDeleting })
	if len(instancesOf(t, p)) == 0 {
		t.Fatal("the VM is gone although its Delete is held")
	}
	var pa v1alpha1.ProxyAddress
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: "mem-198-51-100-60"}, &pa); err != nil {
		t.Fatalf("the address was released while its VM exists: %v", err)
	}
	open()
	eventually(t, "the address is released", func() bool {
		err := k8s.Get(context.Background(), client.ObjectKey{Name: "mem-198-51-100-60"}, &pa)
		return apierrors.IsNotFound(err)
	})
}

func TestMissingPoolSaysSo(t *testing.T) {
	p := newProxy(t, "addr-nopool", withPool("absent"))
	eventually(t, "PoolNotFound", func() bool {
		got := get(t, p)
		c := addressCondition(got)
		return c.Reason == v1alpha1.ReasonPoolNotFound && strings.Contains(c.Message, `"absent"`) && got.Status.Instance == nil
	})
	// The pool's creation wakes the Proxy.
	newPool(t, "absent", "198.51.100.70")
	if ip := allocated(t, p); ip != "198.51.100.70" {
		t.Errorf("got %s", ip)
	}
}

func TestPinnedAddressNeedsAPool(t *testing.T) {
	p := &v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Name: "addr-pin-nopool", Namespace: testNamespace},
		Spec: v1alpha1.ProxySpec{Provider: testProvider, Port: 3128, Addresses: []v1alpha1.IPv4{"198.51.100.10"}}}
	err := k8s.Create(context.Background(), p)
	if err == nil {
		deleteProxy(t, p)
		t.Fatal("a pinned address without a pool was accepted")
	}
	if !strings.Contains(err.Error(), "set addressPool too") {
		t.Errorf("error %q does not say why", err)
	}
	p.Spec.Addresses = []v1alpha1.IPv4{"198.51.100.300"}
	p.Spec.AddressPool = "any"
	if err := k8s.Create(context.Background(), p); err == nil || !strings.Contains(err.Error(), "spec.addresses[0]") {
		if err == nil {
			deleteProxy(t, p)
		}
		t.Errorf("a malformed pinned address: %v, want an error naming spec.addresses[0]", err)
	}
}

func TestPoolValidationNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*v1alpha1.AddressPoolSpec)
		want string
	}{
		{"bad address", func(s *v1alpha1.AddressPoolSpec) { s.Addresses = []v1alpha1.PoolAddresses{"198.51.100.300"} }, "spec.addresses[0]"},
		{"IPv6 range", func(s *v1alpha1.AddressPoolSpec) { s.Addresses = []v1alpha1.PoolAddresses{"2001:db8::1-2001:db8::2"} }, "spec.addresses[0]"},
		{"bad gateway", func(s *v1alpha1.AddressPoolSpec) { s.Gateway = "gw" }, "spec.gateway"},
		{"prefix", func(s *v1alpha1.AddressPoolSpec) { s.Prefix = 33 }, "spec.prefix"},
		{"four resolvers", func(s *v1alpha1.AddressPoolSpec) { s.DNS = []v1alpha1.IPv4{"1.1.1.1", "1.0.0.1", "8.8.8.8", "8.8.4.4"} }, "spec.dns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "invalid"}, Spec: v1alpha1.AddressPoolSpec{
				Provider: testProvider, Addresses: []v1alpha1.PoolAddresses{"198.51.100.10"}, Prefix: 24, Gateway: "198.51.100.1"}}
			tc.edit(&pool.Spec)
			err := k8s.Create(context.Background(), pool)
			if err == nil {
				_ = k8s.Delete(context.Background(), pool)
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %s", err, tc.want)
			}
		})
	}
}

// A ProxyAddress whose Proxy is gone (its finalizer removed by hand) is
// released by the garbage collector once no VM carries the Proxy's UID,
// and not before.
func TestGarbageCollectorReleasesOrphanedAddresses(t *testing.T) {
	ctx := context.Background()
	entry, _ := set.Get(testProvider)
	const goneUID, vmUID = "6f1c2b7e-0000-4000-8000-00000000aa01", "6f1c2b7e-0000-4000-8000-00000000aa02"
	inst, err := entry.Provider.Create(ctx, contract.CreateRequest{
		Name: "gc-addr-vm", UID: vmUID, Owner: entry.Owner, Port: 3128, CloudInit: []byte("#cloud-config\n"),
		Placement: contract.Placement{Region: "r1", MachineType: "small", Image: "debian-12"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = entry.Provider.Delete(ctx, inst.ProviderID) })
	mk := func(name, uid string) *v1alpha1.ProxyAddress {
		pa := &v1alpha1.ProxyAddress{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelPool: "gc", v1alpha1.LabelProxyUID: uid}},
			Spec: v1alpha1.ProxyAddressSpec{Pool: "gc", Provider: testProvider, Address: "198.51.100.9/24", Gateway: "198.51.100.1",
				Proxy: v1alpha1.ProxyRef{Namespace: testNamespace, Name: "gone", UID: uid}}}
		if err := k8s.Create(ctx, pa); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(ctx, pa) })
		return pa
	}
	orphan, holding := mk("gc-198-51-100-9", goneUID), mk("gc-198-51-100-8", vmUID)
	collector := &gc.Collector{Reader: k8s, Providers: set, Addresses: k8s}
	if _, err := collector.Sweep(ctx, entry); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(orphan), &v1alpha1.ProxyAddress{}); !apierrors.IsNotFound(err) {
		t.Errorf("the orphaned address is kept: %v", err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(holding), &v1alpha1.ProxyAddress{}); err != nil {
		t.Errorf("the address of a Proxy whose VM exists was released: %v", err)
	}
}

func TestPoolStatusCountsAndNamesAnInvalidField(t *testing.T) {
	pool := newPool(t, "counted", "198.51.100.80-198.51.100.82")
	p := newProxy(t, "addr-counted", withPool("counted"))
	allocated(t, p)
	eventually(t, "the pool counts 3 addresses, 1 allocated, 2 free", func() bool {
		var got v1alpha1.AddressPool
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pool), &got); err != nil {
			t.Fatal(err)
		}
		s := got.Status
		return s.Total == 3 && s.Allocated == 1 && s.Free == 2 && meta.IsStatusConditionTrue(s.Conditions, v1alpha1.ConditionValid)
	})
	// The metric reports the status's counts.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewPoolAddresses(k8s, leader()))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, m := range families[0].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["pool"] == "counted" {
			got[labels["state"]] = m.GetGauge().GetValue()
		}
	}
	if got["free"] != 2 || got["allocated"] != 1 {
		t.Errorf("egressproxies_pool_addresses{pool=counted} = %v, want free 2, allocated 1", got)
	}
	reversed := newPool(t, "reversed", "198.51.100.90-198.51.100.85")
	eventually(t, "the reversed range is named", func() bool {
		var got v1alpha1.AddressPool
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(reversed), &got); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionValid)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, `spec.addresses[0]: "198.51.100.90-198.51.100.85" ends before it starts`)
	})
}

// The shipped samples of a pool, a Proxy using it, replicas and an egress
// policy pass the CRDs' validation (a server-side dry run).
func TestSamplesAreValid(t *testing.T) {
	for _, sample := range []struct {
		file string
		obj  client.Object
	}{{"addresspool.yaml", &v1alpha1.AddressPool{}}, {"proxy_addresspool.yaml", &v1alpha1.Proxy{}}, {"proxy_replicas.yaml", &v1alpha1.Proxy{}}, {"proxy_egress.yaml", &v1alpha1.Proxy{}}} {
		data, err := os.ReadFile(controllertest.Path("config", "samples", sample.file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(data, sample.obj); err != nil {
			t.Fatalf("%s: %v", sample.file, err)
		}
		if err := k8s.Create(context.Background(), sample.obj, client.DryRunAll); err != nil {
			t.Errorf("%s: %v", sample.file, err)
		}
	}
	// And the pool parses as the controller reads it.
	var pool v1alpha1.AddressPool
	data, _ := os.ReadFile(controllertest.Path("config", "samples", "addresspool.yaml"))
	_ = yaml.Unmarshal(data, &pool)
	if pn, err := addresses.Parse(&pool.Spec); err != nil || len(pn.Addrs) != 11+16+1 {
		t.Errorf("sample pool: %d addresses, %v; want 28", len(pn.Addrs), err)
	}
}

// Moving a Proxy to another pool allocates the new address at once (in
// the status before the new VM), replaces the VM break-before-make, and
// releases the old address only once the old VM is gone.
func TestPoolChangeReleasesTheOldAddressAfterTheOldVM(t *testing.T) {
	newPool(t, "move-a", "198.51.100.110")
	newPool(t, "move-b", "198.51.100.120")
	p := newProxy(t, "addr-move", withPool("move-a"))
	bootGuestAt(t, p, current, allocated(t, p))
	first := waitReady(t, p).Status.Instance.ProviderID
	open := holdDeletes(t)
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.AddressPool = "move-b" })
	eventually(t, "the new pool's address is in the status", func() bool {
		a := get(t, p).Status.Addresses
		return len(a) == 1 && a[0] == "198.51.100.120"
	})
	eventually(t, "the old VM is being deleted (phase Replacing)", func() bool {
		return get(t, p).Status.Phase == v1alpha1.PhaseReplacing
	})
	if n := len(addressesOf(t, "move-a")); n != 1 {
		t.Fatalf("the old address was released (%d left) while its VM's Delete is held", n)
	}
	open()
	eventually(t, "the old address is released", func() bool { return len(addressesOf(t, "move-a")) == 0 })
	bootGuestAt(t, p, func(s *v1alpha1.ProxyStatus) *v1alpha1.InstanceRef {
		if s.Instance != nil && s.Instance.ProviderID != "" && s.Instance.ProviderID != first {
			return s.Instance
		}
		return nil
	}, "198.51.100.120")
	if got := waitReady(t, p); got.Status.Address != "198.51.100.120" {
		t.Errorf("status.address %q, want 198.51.100.120", got.Status.Address)
	}
}

// A serving Proxy moved to a pool with no address left keeps serving on
// its old address, and says why its move waits: only a Proxy without a VM
// is not Ready for want of an address.
func TestServingProxyKeepsServingWhileItsNewPoolIsFull(t *testing.T) {
	newPool(t, "keep-old", "198.51.100.187")
	newPool(t, "keep-full", "198.51.100.188")
	taker := newProxy(t, "keep-taker", withPool("keep-full"))
	allocated(t, taker)
	p := newProxy(t, "keep-mover", withPool("keep-old"))
	bootGuestAt(t, p, current, "198.51.100.187")
	waitReady(t, p)
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.AddressPool = "keep-full" })
	eventually(t, "the move waits for the full pool", func() bool {
		c := addressCondition(get(t, p))
		return c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonPoolExhausted
	})
	if got := get(t, p); readyCondition(got).Status != metav1.ConditionTrue || got.Status.Address != "198.51.100.187" {
		t.Errorf("while its new pool is full: Ready %+v at %q, want it serving on 198.51.100.187", readyCondition(got), got.Status.Address)
	}
}

// The same with replicas: each replica that serves keeps serving on its
// old address while the new pool has none for it.
func TestServingReplicasKeepServingWhileTheirNewPoolIsFull(t *testing.T) {
	newPool(t, "keep-old-two", "198.51.100.205-198.51.100.206")
	newPool(t, "keep-full-two", "198.51.100.207")
	taker := newProxy(t, "keep-taker-two", withPool("keep-full-two"))
	allocated(t, taker)
	p := newProxy(t, "keep-mover-two", func(p *v1alpha1.Proxy) { p.Spec.Replicas, p.Spec.AddressPool = 2, "keep-old-two" })
	playGuests(t, p)
	before := readyN(t, p, 2)
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.AddressPool = "keep-full-two" })
	eventually(t, "the move waits for the full pool", func() bool {
		c := addressCondition(get(t, p))
		return c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonPoolExhausted
	})
	got := get(t, p)
	for k := range 2 {
		if r, was := replicaOf(&got.Status, k), replicaOf(&before.Status, k); !r.Ready || r.Address != was.Address {
			t.Errorf("while the new pool is full: replica %d Ready %v at %q (%s), want it serving on %s", k, r.Ready, r.Address, r.Reason, was.Address)
		}
	}
}
