package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// phases lists every phase, so each has a series even at zero.
var phases = []v1alpha1.ProxyPhase{
	v1alpha1.PhasePending, v1alpha1.PhaseProvisioning, v1alpha1.PhaseReady,
	v1alpha1.PhaseReplacing, v1alpha1.PhaseFailed, v1alpha1.PhaseDeleting,
}

// ProxyPhases is a collector counting Proxies by phase at scrape time,
// with each Proxy's readiness and replica counts, from a reader (the
// manager's cache): the count is always the cluster's, never a tally that
// drifts when a reconcile is missed. The per-Proxy series are what the
// not-Ready and degraded alerts name a Proxy by (docs/operator.md).
type ProxyPhases struct {
	Reader client.Reader
	// Elected closes when this replica leads (the manager's Elected):
	// until then Collect reports nothing (leader.go).
	Elected  <-chan struct{}
	desc     *prometheus.Desc
	ready    *prometheus.Desc
	replicas *prometheus.Desc
}

// NewProxyPhases returns the collector for egressproxies_proxies,
// egressproxies_proxy_ready and egressproxies_proxy_replicas.
func NewProxyPhases(r client.Reader, elected <-chan struct{}) *ProxyPhases {
	return &ProxyPhases{Reader: r, Elected: elected,
		desc: prometheus.NewDesc("egressproxies_proxies", "Proxies by phase.", []string{"phase"}, nil),
		ready: prometheus.NewDesc("egressproxies_proxy_ready", "1 when the Proxy's Ready condition is True, else 0.",
			[]string{"namespace", "proxy", "provider"}, nil),
		replicas: prometheus.NewDesc("egressproxies_proxy_replicas",
			"The Proxy's replicas by state: desired (spec.replicas, at least 1) and ready (answering).", []string{"namespace", "proxy", "state"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *ProxyPhases) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	ch <- c.ready
	ch <- c.replicas
}

// Collect implements prometheus.Collector.
func (c *ProxyPhases) Collect(ch chan<- prometheus.Metric) {
	if !leading(c.Elected) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list v1alpha1.ProxyList
	if err := c.Reader.List(ctx, &list); err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	counts := map[v1alpha1.ProxyPhase]int{}
	for _, p := range list.Items {
		phase := p.Status.Phase
		if phase == "" {
			phase = v1alpha1.PhasePending
		}
		counts[phase]++
		ready := 0.0
		if meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady) {
			ready = 1
		}
		ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, ready, p.Namespace, p.Name, p.Spec.Provider)
		ch <- prometheus.MustNewConstMetric(c.replicas, prometheus.GaugeValue, float64(replica.Desired(&p)), p.Namespace, p.Name, "desired")
		ch <- prometheus.MustNewConstMetric(c.replicas, prometheus.GaugeValue, float64(p.Status.ReadyReplicas), p.Namespace, p.Name, "ready")
	}
	for _, phase := range phases {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[phase]), string(phase))
	}
}
