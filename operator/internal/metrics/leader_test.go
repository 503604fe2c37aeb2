package metrics

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// countingReader lists one Proxy and one AddressPool, and counts lists.
type countingReader struct {
	client.Reader
	lists *atomic.Int32
}

func (r countingReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	r.lists.Add(1)
	switch l := list.(type) {
	case *v1alpha1.ProxyList:
		l.Items = []v1alpha1.Proxy{{Status: v1alpha1.ProxyStatus{Phase: v1alpha1.PhaseReady}}}
	case *v1alpha1.AddressPoolList:
		l.Items = []v1alpha1.AddressPool{{Status: v1alpha1.AddressPoolStatus{Free: 2, Allocated: 1}}}
	}
	return nil
}

// The cluster's counts come from the leader only: the metrics Service
// selects every replica, so a count each replica reported would double
// every sum(), and a standby reading its cache at a scrape would start
// informers it does not need.
func TestClusterGaugesAreTheLeadersOnly(t *testing.T) {
	var lists atomic.Int32
	reader := countingReader{lists: &lists}
	elected := make(chan struct{})
	for name, c := range map[string]prometheus.Collector{
		"egressproxies_proxies":        NewProxyPhases(reader, elected),
		"egressproxies_pool_addresses": NewPoolAddresses(reader, elected),
	} {
		if n := testutil.CollectAndCount(c); n != 0 || lists.Load() != 0 {
			t.Errorf("%s on a standby: %d series after %d lists of the cache; want none and no list", name, n, lists.Load())
		}
	}
	close(elected)
	for name, c := range map[string]prometheus.Collector{
		"egressproxies_proxies":        NewProxyPhases(reader, elected),
		"egressproxies_pool_addresses": NewPoolAddresses(reader, elected),
	} {
		if n := testutil.CollectAndCount(c); n == 0 {
			t.Errorf("%s on the leader: no series", name)
		}
	}
}
