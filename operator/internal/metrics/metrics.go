// Package metrics defines the operator's Prometheus metrics, registered in
// controller-runtime's registry so the manager's metrics endpoint serves
// them beside the controller metrics.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// ProviderCallDuration is the duration of provider calls, by provider,
	// operation and error class ("" for success). Its buckets reach 15
	// minutes: a Create may take up to a provider's task timeout (10
	// minutes on vSphere and Proxmox) and still succeed.
	ProviderCallDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "egressproxies_provider_call_duration_seconds",
		Help:    "Duration of provider calls by provider, type, operation and error class (empty on success).",
		Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 900},
	}, []string{"provider", "type", "operation", "class"})

	// ProviderCallErrors counts failed provider calls by class.
	ProviderCallErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "egressproxies_provider_call_errors_total",
		Help: "Failed provider calls by provider, type, operation and error class.",
	}, []string{"provider", "type", "operation", "class"})

	// ProviderPanics counts provider calls that panicked; each returned a
	// transient error instead of ending the process.
	ProviderPanics = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "egressproxies_provider_panics_total",
		Help: "Provider calls that panicked (recovered into a transient error), by provider, type and operation.",
	}, []string{"provider", "type", "operation"})

	// GCDeletions counts instances the garbage collector deleted, by the
	// pass that found them: "owned" (marked with the entry's owner) or
	// "legacy" (v0.1's marks, which name no owner).
	GCDeletions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "egressproxies_gc_deletions_total",
		Help: "Instances deleted by the garbage collector, by provider, reason and pass (owned or legacy).",
	}, []string{"provider", "reason", "pass"})

	// GCSweepFailures counts garbage-collection sweeps that failed or read
	// a partial list.
	GCSweepFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "egressproxies_gc_sweep_failures_total",
		Help: "Garbage-collection sweeps that failed, or read a partial list, by provider.",
	}, []string{"provider"})
	// GCLastSuccess is when the last complete sweep ended.
	GCLastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "egressproxies_gc_last_success_timestamp_seconds",
		Help: "When the provider's last complete garbage-collection sweep ended (Unix seconds).",
	}, []string{"provider"})

	// CheckOK is 1 when a provider's check target passed its last check.
	CheckOK = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "egressproxies_provider_check_ok",
		Help: "1 when the provider's check target passed its last check, 0 when it failed.",
	}, []string{"provider", "target", "reason"})
)

// Collectors are the metrics this package registers with
// controller-runtime's registry; the app registers the rest (NewBuildInfo,
// NewProxyPhases, NewPoolAddresses). The monitoring kit's test checks its
// alerts name only these (operator/internal/release).
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{ProviderCallDuration, ProviderCallErrors, ProviderPanics, GCDeletions, GCSweepFailures, GCLastSuccess, CheckOK,
		OperationsInFlight, ProxyConnections, ProxyRefusals, ProxyBadRequests, ProxyOpenConnections}
}

func init() {
	crmetrics.Registry.MustRegister(Collectors()...)
}
