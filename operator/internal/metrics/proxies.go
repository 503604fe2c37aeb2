package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// phases lists every phase, so each has a series even at zero.
var phases = []v1alpha1.ProxyPhase{
	v1alpha1.PhasePending, v1alpha1.PhaseProvisioning, v1alpha1.PhaseReady,
	v1alpha1.PhaseReplacing, v1alpha1.PhaseFailed, v1alpha1.PhaseDeleting,
}

// ProxyPhases is a collector counting Proxies by phase at scrape time,
// from a reader (the manager's cache): the count is always the cluster's,
// never a tally that drifts when a reconcile is missed.
type ProxyPhases struct {
	Reader client.Reader
	// Elected closes when this replica leads (the manager's Elected):
	// until then Collect reports nothing (leader.go).
	Elected <-chan struct{}
	desc    *prometheus.Desc
}

// NewProxyPhases returns the collector for egressproxies_proxies.
func NewProxyPhases(r client.Reader, elected <-chan struct{}) *ProxyPhases {
	return &ProxyPhases{Reader: r, Elected: elected, desc: prometheus.NewDesc("egressproxies_proxies", "Proxies by phase.", []string{"phase"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *ProxyPhases) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

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
	}
	for _, phase := range phases {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[phase]), string(phase))
	}
}
