package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest/memprovider"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// The tests of tenancy: a provider entry and an AddressPool say which
// namespaces' Proxies may use them (allowedNamespaces), on the real API
// server with two tenant namespaces.

// tenantProvider is an entry on the test backend that only namespaces
// labelled team=a may use.
const tenantProvider = "tenant"

func tenantEntry(prov *memprovider.Provider, tp trace.TracerProvider) *providers.Entry {
	return &providers.Entry{
		Name: tenantProvider, Type: memprovider.Type, Owner: "c0ffee12-" + tenantProvider,
		Provider:          providers.Instrument(tenantProvider, memprovider.Type, providers.Limit(prov, providers.Limits{QPS: 1000, Burst: 1000, Concurrency: 8}), tp),
		GC:                providers.GC{MinAge: time.Hour, Interval: time.Hour},
		CheckInterval:     time.Hour,
		AllowedNamespaces: labels.SelectorFromSet(labels.Set{"team": "a"}),
	}
}

// newNamespace creates a namespace with the labels.
func newNamespace(t *testing.T, name string, l map[string]string) *corev1.Namespace {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	// envtest runs no namespace controller: the namespace stays
	// Terminating, which is harmless, as its Proxies are gone by then.
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return ns
}

// refusedFor waits until the Proxy is refused for its namespace, and
// returns the message.
func refusedFor(t *testing.T, p *v1alpha1.Proxy) string {
	t.Helper()
	var msg string
	eventually(t, p.Name+" is refused for its namespace", func() bool {
		c := meta.FindStatusCondition(get(t, p).Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Reason != v1alpha1.ReasonNamespaceNotAllowed {
			return false
		}
		msg = c.Message
		return c.Status == metav1.ConditionFalse
	})
	return msg
}

func TestNamespacesOutsideAnEntrysOrPoolsSelectorAreRefused(t *testing.T) {
	newNamespace(t, "team-a", map[string]string{"team": "a"})
	teamB := newNamespace(t, "team-b", map[string]string{"team": "b"})
	// Created with its selector: a selector set by an update may reach
	// the operator's cache after a Proxy's first reconcile, which would
	// draw an address before the rule is seen.
	pool := &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a-pool"},
		Spec: v1alpha1.AddressPoolSpec{
			Provider: testProvider, Addresses: []v1alpha1.PoolAddresses{"198.51.100.190-198.51.100.191"}, Prefix: 24,
			Gateway:           "198.51.100.1",
			AllowedNamespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
		},
	}
	if err := k8s.Create(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pool) })
	in := func(ns string) func(*v1alpha1.Proxy) { return func(p *v1alpha1.Proxy) { p.Namespace = ns } }
	onPool := newProxy(t, "on-pool", func(p *v1alpha1.Proxy) { in("team-b")(p); withPool(pool.Name)(p) })
	onEntry := newProxy(t, "on-entry", func(p *v1alpha1.Proxy) { in("team-b")(p); p.Spec.Provider = tenantProvider })
	allowed := newProxy(t, "on-pool", func(p *v1alpha1.Proxy) { in("team-a")(p); withPool(pool.Name)(p) })

	for p, wants := range map[*v1alpha1.Proxy][]string{
		onPool:  {`namespace "team-b"`, `AddressPool "team-a-pool"`, `"team=a"`},
		onEntry: {`namespace "team-b"`, `provider entry "tenant"`, `"team=a"`},
	} {
		msg := refusedFor(t, p)
		for _, want := range wants {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: message %q does not name %s", p.Name, msg, want)
			}
		}
		if found := eventsFor(t, p); !strings.Contains(strings.Join(found, "\n"), v1alpha1.ReasonNamespaceNotAllowed) {
			t.Errorf("%s: no %s event in %q", p.Name, v1alpha1.ReasonNamespaceNotAllowed, found)
		}
	}
	// The allowed one in team-a draws its address from the same pool.
	if ip := allocated(t, allowed); ip == "" {
		t.Fatal("no address for the allowed namespace")
	}
	// Refused: no address drawn, no VM made.
	if got := get(t, onPool); len(got.Status.Addresses) != 0 || len(addressesOf(t, pool.Name)) != 1 {
		t.Errorf("the refused Proxy holds addresses %v; the pool has %d allocations, want the allowed one's only", got.Status.Addresses, len(addressesOf(t, pool.Name)))
	}
	for _, p := range []*v1alpha1.Proxy{onPool, onEntry} {
		if n := len(liveInstances(t, p.Spec.Provider, string(get(t, p).UID))); n != 0 {
			t.Errorf("%s: %d VMs made while refused", p.Name, n)
		}
	}

	// Labelling team-b lets both go on, without a change of the Proxies.
	teamB.Labels["team"] = "a"
	if err := k8s.Update(context.Background(), teamB); err != nil {
		t.Fatal(err)
	}
	if ip := allocated(t, onPool); ip == "" {
		t.Fatal("no address once team-b is allowed")
	}
	eventually(t, "on-entry's VM is made once team-b is allowed", func() bool {
		return len(liveInstances(t, tenantProvider, string(get(t, onEntry).UID))) == 1
	})
}
