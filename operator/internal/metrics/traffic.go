package metrics

import (
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/egress-proxies/egress-proxies-operator/images/cloudinit"
)

// The traffic each Proxy's VMs carried, per replica, as the probe reads
// it from the default tinyproxy's statistics page (docs/egress.md,
// "Traffic"). Only the leader probes, so only the leader has these series:
// a sum over the operator's replicas counts each connection once.
var (
	ProxyConnections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "egressproxies_proxy_connections_total",
		Help: "Client connections the Proxy's VMs accepted (one request, several on a keep-alive connection, or a CONNECT tunnel), the operator's probes not counted.",
	}, trafficLabels)
	ProxyRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "egressproxies_proxy_refusals_total",
		Help: "Requests the Proxy's VMs refused with a 403: a client outside spec.allowedClients or a destination outside spec.egress (tinyproxy counts both as one).",
	}, trafficLabels)
	ProxyBadRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "egressproxies_proxy_bad_requests_total",
		Help: "Connections to the Proxy's VMs that sent no request the proxy could read.",
	}, trafficLabels)
	ProxyOpenConnections = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "egressproxies_proxy_open_connections",
		Help: "Client connections open on the Proxy's VMs at their last probe, the probe's own not counted.",
	}, trafficLabels)
)

var trafficLabels = []string{"namespace", "proxy", "replica"}

// Traffic turns the counters each probe reads (a VM's totals since its
// proxy started) into the series above: what a VM counted since its last
// reading is added to its replica's series, less the probe's own
// connection. A VM's first reading is its baseline; a counter lower than
// the last one means its proxy restarted, and the new totals are what it
// counted since. The zero value is ready to use.
type Traffic struct {
	mu sync.Mutex
	// last holds each VM's last reading, by provider ID.
	last map[string]reading
	// forgotten holds when each deleted VM was forgotten: a probe answered
	// before the delete can be observed after it, and must not bring the
	// VM's series back. Kept for forgetFor, then pruned: a backend that
	// reuses IDs (Proxmox's VMIDs) gets its new VM read after that.
	forgotten map[string]time.Time
	// now is time.Now unless a test sets it.
	now func() time.Time
}

// forgetFor outlasts any probe in flight at a delete: the reconcile's
// probe and the watch's are bounded by seconds.
const forgetFor = time.Minute

type reading struct {
	labels []string
	stats  cloudinit.Stats
}

// Observe records what the probe of the VM providerID, serving replica of
// the Proxy namespace/name, read.
func (t *Traffic) Observe(namespace, name string, replica int, providerID string, s cloudinit.Stats) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if when, gone := t.forgotten[providerID]; gone && t.clock().Sub(when) <= forgetFor {
		return
	}
	if t.last == nil {
		t.last = map[string]reading{}
	}
	labels := []string{namespace, name, strconv.Itoa(replica)}
	prev, seen := t.last[providerID]
	t.last[providerID] = reading{labels: labels, stats: s}
	connections, refusals, bad := ProxyConnections.WithLabelValues(labels...), ProxyRefusals.WithLabelValues(labels...), ProxyBadRequests.WithLabelValues(labels...)
	if seen {
		since := prev.stats
		if s.Connections < since.Connections || s.Denied < since.Denied || s.Bad < since.Bad {
			since = cloudinit.Stats{} // restarted: all it counted is new
		}
		// The probe's read of the page is one of the connections.
		connections.Add(float64(max(s.Connections-since.Connections, 1) - 1))
		refusals.Add(float64(s.Denied - since.Denied))
		bad.Add(float64(s.Bad - since.Bad))
	}
	t.setOpen(labels)
}

// setOpen sets the replica's open connections: those of every VM read
// under its labels (a replacement is probed beside the VM it replaces),
// less each probe's own.
func (t *Traffic) setOpen(labels []string) {
	var open uint64
	for _, r := range t.last {
		if slices.Equal(r.labels, labels) {
			open += max(r.stats.Open, 1) - 1
		}
	}
	ProxyOpenConnections.WithLabelValues(labels...).Set(float64(open))
}

// Forget drops the VM providerID once it is deleted; its replica's series
// go too when no other VM of the replica is read.
func (t *Traffic) Forget(providerID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tombstone(providerID)
	gone, ok := t.last[providerID]
	if !ok {
		return
	}
	delete(t.last, providerID)
	for _, r := range t.last {
		if slices.Equal(r.labels, gone.labels) {
			t.setOpen(gone.labels)
			return
		}
	}
	for _, v := range []interface {
		DeleteLabelValues(...string) bool
	}{ProxyConnections, ProxyRefusals, ProxyBadRequests, ProxyOpenConnections} {
		v.DeleteLabelValues(gone.labels...)
	}
}

// tombstone marks providerID forgotten and prunes the marks older than
// forgetFor.
func (t *Traffic) tombstone(providerID string) {
	at := t.clock()
	for id, when := range t.forgotten {
		if at.Sub(when) > forgetFor {
			delete(t.forgotten, id)
		}
	}
	if t.forgotten == nil {
		t.forgotten = map[string]time.Time{}
	}
	t.forgotten[providerID] = at
}

func (t *Traffic) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}
