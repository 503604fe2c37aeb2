package addresspool

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/addresses"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controllertest"
)

// newPool creates a pool of provider entry provider handing out ranges.
func newPool(t *testing.T, name, provider string, ranges ...string) *v1alpha1.AddressPool {
	t.Helper()
	pool := &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.AddressPoolSpec{Provider: provider, Prefix: 24, Gateway: "198.51.100.1"},
	}
	for _, r := range ranges {
		pool.Spec.Addresses = append(pool.Spec.Addresses, v1alpha1.PoolAddresses(r))
	}
	if err := k8s.Create(context.Background(), pool); err != nil {
		t.Fatalf("create AddressPool %s: %v", name, err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pool) })
	return pool
}

// hold creates the ProxyAddress an allocation of address a from pool
// would, under name (addresses.Name's when empty).
func hold(t *testing.T, pool *v1alpha1.AddressPool, a, name string) {
	t.Helper()
	if name == "" {
		name = addresses.Name(pool.Spec.Provider, netip.MustParseAddr(a))
	}
	pa := &v1alpha1.ProxyAddress{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ProxyAddressSpec{Pool: pool.Name, Provider: pool.Spec.Provider, Address: a + "/24", Gateway: "198.51.100.1",
			Proxy: v1alpha1.ProxyRef{Namespace: "default", Name: "p-" + name, UID: "uid-" + name}},
	}
	if err := k8s.Create(context.Background(), pa); err != nil {
		t.Fatalf("create ProxyAddress %s: %v", name, err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pa) })
}

// status reads the pool's status.
func status(t *testing.T, name string) v1alpha1.AddressPoolStatus {
	t.Helper()
	var pool v1alpha1.AddressPool
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, &pool); err != nil {
		t.Fatal(err)
	}
	return pool.Status
}

// condition is the pool's condition of the type, or the zero condition.
func condition(t *testing.T, name, typ string) metav1.Condition {
	t.Helper()
	if c := meta.FindStatusCondition(status(t, name).Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// A pool counts what it hands out, what is held and what is free; an
// address held outside its ranges (the pool shrank under it) is held, not
// free; a release frees it again.
func TestPoolCountsItsAddresses(t *testing.T) {
	pool := newPool(t, "counts", "count-entry", "198.51.100.10-198.51.100.12")
	hold(t, pool, "198.51.100.11", "")
	hold(t, pool, "198.51.100.40", "")
	controllertest.Eventually(t, "3 addresses, 2 held, 2 free, Valid", func() bool {
		s := status(t, "counts")
		return s.Total == 3 && s.Allocated == 2 && s.Free == 2 && meta.IsStatusConditionTrue(s.Conditions, v1alpha1.ConditionValid)
	})
	pa := &v1alpha1.ProxyAddress{ObjectMeta: metav1.ObjectMeta{Name: addresses.Name("count-entry", netip.MustParseAddr("198.51.100.11"))}}
	if err := k8s.Delete(context.Background(), pa); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "the release frees its address", func() bool {
		s := status(t, "counts")
		return s.Allocated == 1 && s.Free == 3
	})
}

// A field that does not parse makes the pool invalid, naming the field and
// the value.
func TestInvalidPoolNamesTheField(t *testing.T) {
	newPool(t, "reversed", "invalid-entry", "198.51.100.90-198.51.100.85")
	controllertest.Eventually(t, "the reversed range is named", func() bool {
		c := condition(t, "reversed", v1alpha1.ConditionValid)
		return c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonPoolInvalid &&
			strings.Contains(c.Message, `spec.addresses[0]: "198.51.100.90-198.51.100.85" ends before it starts`)
	})
}

// Of two pools of one entry that overlap, the younger is invalid, naming
// the older and the range; a pool of another entry may hand out the same
// addresses.
func TestYoungerOverlappingPoolIsInvalid(t *testing.T) {
	newPool(t, "older", "overlap-entry", "198.51.100.20-198.51.100.22")
	time.Sleep(time.Second) // creation times are kept in whole seconds
	newPool(t, "younger", "overlap-entry", "198.51.100.21-198.51.100.23")
	newPool(t, "elsewhere", "other-entry", "198.51.100.20-198.51.100.22")
	controllertest.Eventually(t, "the younger pool is refused, naming the older and the range", func() bool {
		c := condition(t, "younger", v1alpha1.ConditionValid)
		return c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonPoolOverlaps &&
			strings.Contains(c.Message, `"older"`) && strings.Contains(c.Message, "198.51.100.21-198.51.100.22")
	})
	for _, name := range []string{"older", "elsewhere"} {
		controllertest.Eventually(t, name+" is Valid", func() bool {
			return condition(t, name, v1alpha1.ConditionValid).Status == metav1.ConditionTrue
		})
	}
}

// An address held twice among an entry's ProxyAddresses (under an old
// pool-based name beside the entry's lock) is reported on the pool, and
// cleared when one goes.
func TestAddressHeldTwiceIsReported(t *testing.T) {
	pool := newPool(t, "twice", "twice-entry", "198.51.100.30-198.51.100.31")
	hold(t, pool, "198.51.100.30", "")
	old := fmt.Sprintf("twice-%s", strings.ReplaceAll("198.51.100.30", ".", "-"))
	hold(t, pool, "198.51.100.30", old)
	controllertest.Eventually(t, "the duplicate is reported", func() bool {
		c := condition(t, "twice", v1alpha1.ConditionAddressesUnique)
		return c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonDuplicateAddress && strings.Contains(c.Message, "198.51.100.30")
	})
	if err := k8s.Delete(context.Background(), &v1alpha1.ProxyAddress{ObjectMeta: metav1.ObjectMeta{Name: old}}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "the duplicate is cleared", func() bool {
		return condition(t, "twice", v1alpha1.ConditionAddressesUnique).Status == metav1.ConditionTrue
	})
}
