package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/egress-proxies/egress-proxies-operator/images/cloudinit"
)

func TestTrafficCountsWhatEachVMCountedSinceItsLastReading(t *testing.T) {
	var tr Traffic
	labels := []string{"team-a", "partner", "0"}
	counted := func() (connections, refusals, bad, open float64) {
		return testutil.ToFloat64(ProxyConnections.WithLabelValues(labels...)), testutil.ToFloat64(ProxyRefusals.WithLabelValues(labels...)),
			testutil.ToFloat64(ProxyBadRequests.WithLabelValues(labels...)), testutil.ToFloat64(ProxyOpenConnections.WithLabelValues(labels...))
	}
	check := func(step string, connections, refusals, bad, open float64) {
		t.Helper()
		c, r, b, o := counted()
		if c != connections || r != refusals || b != bad || o != open {
			t.Errorf("%s: connections %v, refusals %v, bad %v, open %v; want %v, %v, %v, %v", step, c, r, b, o, connections, refusals, bad, open)
		}
	}
	// The first reading is the baseline: what the VM counted before the
	// operator read it is not this leader's to add.
	tr.Observe("team-a", "partner", 0, "vm-1", cloudinit.Stats{Open: 3, Connections: 40, Denied: 5, Bad: 1})
	check("the baseline", 0, 0, 0, 2)
	// 10 more connections, the probe's among them; 2 refused, 1 bad.
	tr.Observe("team-a", "partner", 0, "vm-1", cloudinit.Stats{Open: 1, Connections: 50, Denied: 7, Bad: 2})
	check("a reading later", 9, 2, 1, 0)
	// Only the probe since.
	tr.Observe("team-a", "partner", 0, "vm-1", cloudinit.Stats{Open: 1, Connections: 51, Denied: 7, Bad: 2})
	check("only the probe since", 9, 2, 1, 0)
	// The proxy restarted: its totals are what it counted since.
	tr.Observe("team-a", "partner", 0, "vm-1", cloudinit.Stats{Open: 2, Connections: 4, Denied: 1})
	check("after a restart", 12, 3, 1, 1)
	// A replacement is read beside it: its first reading is a baseline,
	// and the replica's open connections are both VMs'.
	tr.Observe("team-a", "partner", 0, "vm-2", cloudinit.Stats{Open: 2, Connections: 3})
	check("a replacement's baseline", 12, 3, 1, 2)
	tr.Observe("team-a", "partner", 0, "vm-2", cloudinit.Stats{Open: 1, Connections: 8, Denied: 1})
	check("the replacement counts", 16, 4, 1, 1)
	// Another replica is its own series.
	tr.Observe("team-a", "partner", 1, "vm-3", cloudinit.Stats{Open: 1, Connections: 1})
	tr.Observe("team-a", "partner", 1, "vm-3", cloudinit.Stats{Open: 1, Connections: 100})
	check("another replica read", 16, 4, 1, 1)
	if got := testutil.ToFloat64(ProxyConnections.WithLabelValues("team-a", "partner", "1")); got != 98 {
		t.Errorf("replica 1's connections: %v, want 98", got)
	}
	// The replaced VM goes: the replica's series stay, with the open
	// connections of the VM left.
	tr.Forget("vm-1")
	check("the replaced VM forgotten", 16, 4, 1, 0)
	// The replica's last VM goes: its series go.
	tr.Forget("vm-2")
	if n := testutil.CollectAndCount(ProxyConnections, "egressproxies_proxy_connections_total"); n != 1 {
		t.Errorf("connection series after replica 0's VMs are gone: %d, want replica 1's only", n)
	}
	for name, v := range map[string]interface{ DeleteLabelValues(...string) bool }{
		"refusals": ProxyRefusals, "bad requests": ProxyBadRequests, "open connections": ProxyOpenConnections,
	} {
		if v.DeleteLabelValues(labels...) {
			t.Errorf("replica 0's %s series outlived its VMs", name)
		}
	}
	tr.Forget("vm-unknown") // nothing to forget: no panic, nothing changed
	tr.Forget("vm-3")
	if n := testutil.CollectAndCount(ProxyOpenConnections); n != 0 {
		t.Errorf("open-connection series after every VM is gone: %d", n)
	}
}
