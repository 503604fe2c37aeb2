package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// PoolAddresses reports each AddressPool's free and allocated addresses,
// as its status counts them, read at scrape time: a pool running out is
// an alert before a Proxy waits.
type PoolAddresses struct {
	Reader client.Reader
	// Elected closes when this replica leads (the manager's Elected):
	// until then Collect reports nothing (leader.go).
	Elected <-chan struct{}
	desc    *prometheus.Desc
}

// NewPoolAddresses returns the collector for egressproxies_pool_addresses.
func NewPoolAddresses(r client.Reader, elected <-chan struct{}) *PoolAddresses {
	return &PoolAddresses{Reader: r, Elected: elected, desc: prometheus.NewDesc("egressproxies_pool_addresses",
		"Addresses of each AddressPool by state (free or allocated).", []string{"pool", "state"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *PoolAddresses) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *PoolAddresses) Collect(ch chan<- prometheus.Metric) {
	if !leading(c.Elected) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list v1alpha1.AddressPoolList
	if err := c.Reader.List(ctx, &list); err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for _, p := range list.Items {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(p.Status.Free), p.Name, "free")
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(p.Status.Allocated), p.Name, "allocated")
	}
}
