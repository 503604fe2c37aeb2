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
		Help: "Requests the Proxy's VMs refused with a 403, by reason: client (outside spec.allowedClients) or destination (outside spec.egress).",
	}, append(slices.Clone(trafficLabels), "reason"))
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

// The reasons of egressproxies_proxy_refusals_total.
const (
	RefusedClient      = "client"
	RefusedDestination = "destination"
)

// Traffic turns the counters each probe reads (a VM's totals since its
// proxy, or its refusals counter, started) into the series above: what a
// VM counted since its last reading is added to its replica's series, less
// the probe's own connection. A VM's first reading is its baseline; a
// counter lower than at its last reading was restarted, and its new total
// is what it counted since. The zero value is ready to use.
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
	if seen {
		before := prev.stats
		// The probe's read of the page is one of the connections.
		ProxyConnections.WithLabelValues(labels...).Add(float64(max(since(s.Connections, before.Connections), 1) - 1))
		ProxyBadRequests.WithLabelValues(labels...).Add(float64(since(s.Bad, before.Bad)))
		ProxyRefusals.WithLabelValues(append(labels, RefusedClient)...).Add(float64(since(s.ClientRefusals, before.ClientRefusals)))
		ProxyRefusals.WithLabelValues(append(labels, RefusedDestination)...).Add(float64(since(s.DestinationRefusals, before.DestinationRefusals)))
	}
	t.setOpen(labels)
}

// since is what a counter counted since its last reading before: a
// counter lower than then was restarted (the proxy, or the VM's refusals
// counter), and all it holds is new.
func since(now, before uint64) uint64 {
	if now < before {
		return now
	}
	return now - before
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
	replica := prometheus.Labels{}
	for i, name := range trafficLabels {
		replica[name] = gone.labels[i]
	}
	for _, v := range []*prometheus.MetricVec{ProxyConnections.MetricVec, ProxyRefusals.MetricVec, ProxyBadRequests.MetricVec, ProxyOpenConnections.MetricVec} {
		v.DeletePartialMatch(replica)
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
