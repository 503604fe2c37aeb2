package proxy

import "time"

// Bounds limit the Proxy reconciler's own work; zero values take the
// defaults. Provider calls are not bounded here: they run beside the
// workers (Operations), each entry capped by its limits.concurrency.
type Bounds struct {
	// Workers is how many Proxies reconcile at once (the controller's
	// MaxConcurrentReconciles). Default 3 (docs/architecture.md, Principles): a reconcile
	// waits only for the API server now, so a few workers keep up with
	// many Proxies; raise it for fleets of thousands.
	Workers int
	// Deadline bounds one reconcile. It waits for the API server only
	// (reads, status writes), so a reconcile that reaches it met an API
	// server that does not answer, and is retried with back-off rather
	// than holding its worker. Default 30 s.
	Deadline time.Duration
}

// Default bounds.
const (
	DefaultWorkers  = 3
	DefaultDeadline = 30 * time.Second
)

func (b Bounds) withDefaults() Bounds {
	if b.Workers == 0 {
		b.Workers = DefaultWorkers
	}
	if b.Deadline == 0 {
		b.Deadline = DefaultDeadline
	}
	return b
}
