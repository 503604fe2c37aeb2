package proxy

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/addresses"
)

// poolCondition returns the pool's condition of the type, or the zero
// condition when it has none.
func poolCondition(t *testing.T, name, typ string) metav1.Condition {
	t.Helper()
	var pool v1alpha1.AddressPool
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, &pool); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(pool.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func TestOverlappingPoolsNeverGiveOneAddressToTwoProxies(t *testing.T) {
	newPool(t, "ovl-a", "198.51.100.220-198.51.100.222")
	// Created a second later: the younger of the two, whatever the names.
	time.Sleep(time.Second)
	newPool(t, "ovl-b", "198.51.100.221-198.51.100.223")
	eventually(t, "the younger pool is refused, naming both pools and the range", func() bool {
		c := poolCondition(t, "ovl-b", v1alpha1.ConditionValid)
		return c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonPoolOverlaps &&
			strings.Contains(c.Message, `"ovl-a"`) && strings.Contains(c.Message, "198.51.100.221-198.51.100.222")
	})
	if c := poolCondition(t, "ovl-a", v1alpha1.ConditionValid); c.Status != metav1.ConditionTrue {
		t.Errorf("the older pool: Valid %s %s: %s, want True", c.Status, c.Reason, c.Message)
	}
	a := newProxy(t, "ovl-on-a", withPool("ovl-a", "198.51.100.221"))
	b := newProxy(t, "ovl-on-b", withPool("ovl-b"))
	if ip := allocated(t, a); ip != "198.51.100.221" {
		t.Fatalf("the older pool's Proxy got %s, want its pinned 198.51.100.221", ip)
	}
	eventually(t, "the younger pool's Proxy says why it has no address", func() bool {
		c := addressCondition(get(t, b))
		return c.Reason == v1alpha1.ReasonPoolOverlaps && strings.Contains(c.Message, `"ovl-a"`)
	})
	if got := get(t, b).Status.Addresses; len(got) > 0 {
		t.Errorf("the younger pool's Proxy holds %v", got)
	}
}

func TestAnAddressIsLockedAcrossPoolsAndOldNames(t *testing.T) {
	ctx := context.Background()
	newPool(t, "lock", "198.51.100.230-198.51.100.231")
	// An allocation of 198.51.100.230 by an earlier release, named after
	// another pool of the same provider entry.
	old := earlierAllocation(t, "gone-pool", "old-holder", "198.51.100.230")
	eventually(t, "the cache holds the old allocation", func() bool {
		return k8s.Get(ctx, client.ObjectKeyFromObject(old), &v1alpha1.ProxyAddress{}) == nil
	})
	// First a Proxy taking any address: .230 is the pool's first, and
	// only the old allocation keeps it from taking it.
	free := newProxy(t, "lock-free", withPool("lock"))
	if ip := allocated(t, free); ip != "198.51.100.231" {
		t.Errorf("a Proxy of the pool got %s, want 198.51.100.231: .230 is held under its old name", ip)
	}
	pinned := newProxy(t, "lock-pinned", withPool("lock", "198.51.100.230"))
	eventually(t, "the Proxy pinning the held address is told who holds it", func() bool {
		c := addressCondition(get(t, pinned))
		return c.Reason == v1alpha1.ReasonAddressPending && strings.Contains(c.Message, "old-holder")
	})
	for _, pa := range addressesOf(t, "lock") {
		if pa.Name != addresses.Name(testProvider, netip.MustParseAddr("198.51.100.231")) {
			t.Errorf("ProxyAddress %s of %s: want only %s-198-51-100-231, named after the provider entry", pa.Name, pa.Spec.Address, testProvider)
		}
	}
}

func TestDuplicateAllocationsAreReportedNotResolved(t *testing.T) {
	ctx := context.Background()
	newPool(t, "dup-a", "198.51.100.240")
	newPool(t, "dup-b", "198.51.100.241")
	// What two overlapping pools of an earlier release left: one address,
	// held twice, each ProxyAddress named after its own pool.
	made := []*v1alpha1.ProxyAddress{
		earlierAllocation(t, "dup-a", "first", "198.51.100.240"),
		earlierAllocation(t, "dup-b", "second", "198.51.100.240"),
	}
	for _, pool := range []string{"dup-a", "dup-b"} {
		eventually(t, pool+" reports the address held twice, naming both holders", func() bool {
			c := poolCondition(t, pool, v1alpha1.ConditionAddressesUnique)
			return c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonDuplicateAddress &&
				strings.Contains(c.Message, "198.51.100.240") && strings.Contains(c.Message, "default/first") && strings.Contains(c.Message, "default/second")
		})
	}
	for _, pa := range made {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pa), &v1alpha1.ProxyAddress{}); err != nil {
			t.Errorf("ProxyAddress %s was resolved away: %v", pa.Name, err)
		}
	}
}

// earlierAllocation creates the ProxyAddress an earlier release made for
// address a of pool to a Proxy of the test namespace named proxy: named
// after the pool, as those releases named them.
func earlierAllocation(t *testing.T, pool, proxy, a string) *v1alpha1.ProxyAddress {
	t.Helper()
	uid := "uid-of-" + proxy
	pa := &v1alpha1.ProxyAddress{
		ObjectMeta: metav1.ObjectMeta{Name: pool + "-" + strings.ReplaceAll(a, ".", "-"),
			Labels: map[string]string{v1alpha1.LabelPool: pool, v1alpha1.LabelProxyUID: uid}},
		Spec: v1alpha1.ProxyAddressSpec{Pool: pool, Provider: testProvider, Address: a + "/24", Gateway: "198.51.100.1",
			Proxy: v1alpha1.ProxyRef{Namespace: testNamespace, Name: proxy, UID: uid}},
	}
	if err := k8s.Create(context.Background(), pa); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pa) })
	return pa
}
