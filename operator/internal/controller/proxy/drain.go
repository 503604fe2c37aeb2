package proxy

import (
	"context"
	"sync"
	"time"
)

// A VM that served clients through the Service is deleted only Drain after
// it left the Service's EndpointSlice: kube-proxy (or whatever implements
// the Service) needs a moment to stop sending new connections to it, and
// the connections already open get that long to finish, as a Pod's
// termination grace does. Without it a client of the Service meets a VM
// that is gone (docs/addresses.md, "Replacement").

// drains remembers when each draining VM left the Service. It lives in
// memory: an operator that restarts drains a VM again from the start,
// which is only later, never sooner.
type drains struct {
	mu    sync.Mutex
	since map[string]time.Time // providerID → when it left the Service
}

// remaining returns how long the VM providerID must still drain, starting
// its drain now if it has none yet.
func (d *drains) remaining(providerID string, period time.Duration) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	if d.since == nil {
		d.since = map[string]time.Time{}
	}
	for id, at := range d.since {
		// A drain nobody finished (its Proxy deleted, say) is forgotten.
		if now.Sub(at) > period+time.Hour {
			delete(d.since, id)
		}
	}
	at, ok := d.since[providerID]
	if !ok {
		d.since[providerID] = now
		return period
	}
	return max(period-now.Sub(at), 0)
}

// forget drops what the reconciler keeps in memory of a VM once it is
// deleted: its drain and its failed probes in a row (readiness.go).
func (r *Reconciler) forget(providerID string) {
	r.drains.done(providerID)
	r.probeFailures.answered(providerID)
}

// done forgets the VM's drain once it is deleted.
func (d *drains) done(providerID string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.since, providerID)
}

// sleep waits d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
