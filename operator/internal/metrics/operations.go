package metrics

import "github.com/prometheus/client_golang/prometheus"

// OperationsInFlight is the number of provider operations the Proxy
// reconciler runs beside its workers (operation.Runner), by provider
// entry and operation. Those waiting for a slot under the entry's
// limits.concurrency count too: a gauge that stays high names the backend
// that is slow.
var OperationsInFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "egressproxies_provider_operations_in_flight",
	Help: "Provider operations running or waiting for a call slot, by provider and operation (Create, Get, Delete, Finalize, Clear).",
}, []string{"provider", "operation"})
