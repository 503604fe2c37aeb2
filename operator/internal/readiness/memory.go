// Package readiness holds what the operator knows of the VMs that serve
// or served a Proxy's clients: the serving watch that probes them between
// resyncs (Watch), and what it remembers of them in memory (Memory): how
// many probes in a row each failed, and when each left the Service to
// drain. An operator that restarts starts again from nothing: it counts
// failures from zero and drains a VM again from the start, which is only
// later, never sooner.
package readiness

import (
	"sync"
	"time"
)

// FailureThreshold is how many probes in a row a serving proxy must fail
// before it leaves the Service, as a Pod's readinessProbe has it (its
// failureThreshold defaults to 3): one probe times out on a busy host
// while the proxy is fine — make e2e saw a replica leave the Service for
// one probe while its neighbour booted on the same CPUs. A proxy that was
// never ready is not held to it: it is not ready until it answers.
const FailureThreshold = 3

// Memory is each VM's failed probes in a row and drain, by providerID.
//
// A VM that served clients through the Service is deleted only a drain
// period after it left the Service's EndpointSlice: kube-proxy (or
// whatever implements the Service) needs a moment to stop sending new
// connections to it, and the connections already open get that long to
// finish, as a Pod's termination grace does. Without it a client of the
// Service meets a VM that is gone (docs/addresses.md, "Replacement").
type Memory struct {
	mu       sync.Mutex
	failures map[string]int       // failed probes in a row
	left     map[string]time.Time // when it left the Service
}

// Failed counts a failed probe of the VM and returns its failures in a
// row.
func (m *Memory) Failed(providerID string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failures == nil {
		m.failures = map[string]int{}
	}
	m.failures[providerID]++
	return m.failures[providerID]
}

// Answered forgets the VM's failed probes.
func (m *Memory) Answered(providerID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.failures, providerID)
}

// Drain returns how long the VM must still drain, of period, starting its
// drain now if it has none yet. A drain nobody finished (its Proxy
// deleted, say) is forgotten an hour after its period.
func (m *Memory) Drain(providerID string, period time.Duration) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if m.left == nil {
		m.left = map[string]time.Time{}
	}
	for id, at := range m.left {
		if now.Sub(at) > period+time.Hour {
			delete(m.left, id)
		}
	}
	at, ok := m.left[providerID]
	if !ok {
		m.left[providerID] = now
		return period
	}
	return max(period-now.Sub(at), 0)
}

// Serves records that the VM is in the Service again: a drain it had
// begun is over, and when it leaves again it drains the whole period from
// then. Without it, a VM put back in the Service after its drain began (a
// status write lost to a conflict, a scale-down undone) would be deleted
// as soon as it left the Service again, its clients still sent to it.
func (m *Memory) Serves(providerID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.left, providerID)
}

// Forget drops all the Memory holds of a VM once it is deleted.
func (m *Memory) Forget(providerID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.failures, providerID)
	delete(m.left, providerID)
}
