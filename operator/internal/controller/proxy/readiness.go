package proxy

import (
	"sync"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// failureThreshold is how many probes in a row a serving proxy must fail
// before it leaves the Service, as a Pod's readinessProbe has it (its
// failureThreshold defaults to 3): one probe times out on a busy host
// while the proxy is fine — make e2e saw a replica leave the Service for
// one probe while its neighbour booted on the same CPUs. A proxy that was
// never ready is not held to it: it is not ready until it answers.
const failureThreshold = 3

// probeFailures counts each serving instance's failed probes in a row. It
// lives in memory: an operator that restarts counts again from zero.
type probeFailures struct {
	mu sync.Mutex
	n  map[string]int // providerID → failures in a row
}

// failed counts a failed probe of providerID and returns the count.
func (f *probeFailures) failed(providerID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[string]int{}
	}
	f.n[providerID]++
	return f.n[providerID]
}

// answered forgets providerID's failures.
func (f *probeFailures) answered(providerID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.n, providerID)
}

// serving reports whether ro's instance is the one clients use now: the
// serving instance (not a replacement) of a replica that is ready.
func serving(proxy *v1alpha1.Proxy, ro role) bool {
	return !ro.repl && replica.Ready(proxy, ro.index)
}
