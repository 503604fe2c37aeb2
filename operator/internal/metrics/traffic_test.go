package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/egress-proxies/egress-proxies-operator/images/cloudinit"
)

func TestTrafficCountsWhatEachVMCountedSinceItsLastReading(t *testing.T) {
	var tr Traffic
	labels := []string{"team-a", "partner", "0"}
	type series struct{ connections, client, destination, bad, open float64 }
	check := func(step string, want series) {
		t.Helper()
		got := series{
			testutil.ToFloat64(ProxyConnections.WithLabelValues(labels...)),
			testutil.ToFloat64(ProxyRefusals.WithLabelValues(append(labels, RefusedClient)...)),
			testutil.ToFloat64(ProxyRefusals.WithLabelValues(append(labels, RefusedDestination)...)),
			testutil.ToFloat64(ProxyBadRequests.WithLabelValues(labels...)),
			testutil.ToFloat64(ProxyOpenConnections.WithLabelValues(labels...)),
		}
		if got != want {
			t.Errorf("%s: %+v, want %+v", step, got, want)
		}
	}
	// The first reading is the baseline: what the VM counted before the
	// operator read it is not this leader's to add.
	tr.Observe("team-a", "partner", 0, "vm-1", cloudinit.Stats{Open: 3, Connections: 40, Bad: 1, ClientRefusals: 2, DestinationRefusals: 3})
	check("the baseline", series{open: 2})
	// 10 more connections, the probe's among them; one client and two
	// destinations refused, 1 bad.
	tr.Observe("team-a", "partner", 0, "vm-1", cloudinit.Stats{Open: 1, Connections: 50, Bad: 2, ClientRefusals: 3, DestinationRefusals: 5})
	check("a reading later", series{9, 1, 2, 1, 0})
	// Only the probe since.
	tr.Observe("team-a", "partner", 0, "vm-1", cloudinit.Stats{Open: 1, Connections: 51, Bad: 2, ClientRefusals: 3, DestinationRefusals: 5})
	check("only the probe since", series{9, 1, 2, 1, 0})
	// The proxy restarted: its totals are what it counted since. The
	// refusals counter counts the VM's boot and goes on.
	tr.Observe("team-a", "partner", 0, "vm-1", cloudinit.Stats{Open: 2, Connections: 4, ClientRefusals: 4, DestinationRefusals: 5})
	check("after the proxy restarted", series{12, 2, 2, 1, 1})
	// The refusals counter restarted and has not read all the journal
	// yet: each counter is judged on its own.
	tr.Observe("team-a", "partner", 0, "vm-1", cloudinit.Stats{Open: 2, Connections: 6, ClientRefusals: 1, DestinationRefusals: 5})
	check("after the refusals counter restarted", series{13, 3, 2, 1, 1})
	// A replacement is read beside it: its first reading is a baseline,
	// and the replica's open connections are both VMs'.
	tr.Observe("team-a", "partner", 0, "vm-2", cloudinit.Stats{Open: 2, Connections: 3})
	check("a replacement's baseline", series{13, 3, 2, 1, 2})
	tr.Observe("team-a", "partner", 0, "vm-2", cloudinit.Stats{Open: 1, Connections: 8, DestinationRefusals: 1})
	check("the replacement counts", series{17, 3, 3, 1, 1})
	// Another replica is its own series.
	tr.Observe("team-a", "partner", 1, "vm-3", cloudinit.Stats{Open: 1, Connections: 1})
	tr.Observe("team-a", "partner", 1, "vm-3", cloudinit.Stats{Open: 1, Connections: 100})
	check("another replica read", series{17, 3, 3, 1, 1})
	if got := testutil.ToFloat64(ProxyConnections.WithLabelValues("team-a", "partner", "1")); got != 98 {
		t.Errorf("replica 1's connections: %v, want 98", got)
	}
	// The replaced VM goes: the replica's series stay, with the open
	// connections of the VM left.
	tr.Forget("vm-1")
	check("the replaced VM forgotten", series{17, 3, 3, 1, 0})
	// The replica's last VM goes: its series go.
	tr.Forget("vm-2")
	if n := testutil.CollectAndCount(ProxyConnections, "egressproxies_proxy_connections_total"); n != 1 {
		t.Errorf("connection series after replica 0's VMs are gone: %d, want replica 1's only", n)
	}
	if n := deleteSeriesOf("team-a", "partner", "0"); n != 0 {
		t.Errorf("replica 0's VMs are gone, and %d of its series outlived them", n)
	}
	tr.Forget("vm-unknown") // nothing to forget: no panic, nothing changed
	tr.Forget("vm-3")
	if n := testutil.CollectAndCount(ProxyOpenConnections); n != 0 {
		t.Errorf("open-connection series after every VM is gone: %d", n)
	}
}

// A watch probe answered before its VM was deleted can be observed after
// the reconcile forgot the VM: the reading must not bring the deleted VM's
// series back, or they would stay until the operator restarts.
func TestTrafficIgnoresAReadingOfAForgottenVM(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	tr := Traffic{now: func() time.Time { return at }}
	tr.Observe("team-b", "late", 0, "vm-late", cloudinit.Stats{Open: 1, Connections: 1})
	tr.Forget("vm-late")
	tr.Observe("team-b", "late", 0, "vm-late", cloudinit.Stats{Open: 2, Connections: 5})
	if n := deleteSeriesOf("team-b", "late", "0"); n != 0 {
		t.Errorf("%d of the forgotten VM's series came back with a late reading", n)
	}
	// Another VM of the same replica is read as usual.
	tr.Observe("team-b", "late", 0, "vm-next", cloudinit.Stats{Open: 2, Connections: 1})
	if got := testutil.ToFloat64(ProxyOpenConnections.WithLabelValues("team-b", "late", "0")); got != 1 {
		t.Errorf("the next VM's open connections: %v, want 1", got)
	}
	tr.Forget("vm-next")
	// A backend that reuses IDs (Proxmox's VMIDs) gets its new VM read
	// once the mark has outlasted any probe in flight.
	at = at.Add(forgetFor)
	tr.Observe("team-b", "late", 1, "vm-late", cloudinit.Stats{Open: 1, Connections: 1})
	if tr.last["vm-late"].stats.Connections != 0 {
		t.Errorf("a reading at forgetFor after the forget was counted; the mark still holds then")
	}
	at = at.Add(time.Second)
	tr.Observe("team-b", "late", 1, "vm-late", cloudinit.Stats{Open: 3, Connections: 1})
	if got := testutil.ToFloat64(ProxyOpenConnections.WithLabelValues("team-b", "late", "1")); got != 2 {
		t.Errorf("a reused ID's VM past forgetFor: open connections %v, want 2", got)
	}
	// Each forget prunes the marks older than forgetFor: vm-next's goes.
	tr.Forget("vm-late")
	if len(tr.forgotten) != 1 || tr.forgotten["vm-late"] != at {
		t.Errorf("marks after forgetting the reused ID: %v; want vm-late's at %v only", tr.forgotten, at)
	}
	at = at.Add(forgetFor / 2)
	tr.Forget("vm-other")
	at = at.Add(forgetFor/2 + time.Second)
	tr.Forget("vm-third")
	if _, kept := tr.forgotten["vm-late"]; kept || len(tr.forgotten) != 2 {
		t.Errorf("marks after a forget past vm-late's: %v; want vm-other's and vm-third's", tr.forgotten)
	}
}

// deleteSeriesOf deletes the traffic series of a replica and returns how
// many there were.
func deleteSeriesOf(namespace, proxy, replica string) int {
	n := 0
	for _, v := range []*prometheus.MetricVec{ProxyConnections.MetricVec, ProxyRefusals.MetricVec, ProxyBadRequests.MetricVec, ProxyOpenConnections.MetricVec} {
		n += v.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "proxy": proxy, "replica": replica})
	}
	return n
}
