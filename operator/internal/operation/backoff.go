package operation

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// A lane's back-off after transient failures (contract §5: transient
// errors are retried with exponential back-off). Measured under injected
// faults (the fleet benchmark, docs/performance.md): without it a Proxy whose operations failed was
// retried as fast as its calls failed, 27 operations a second across
// five Proxies against a backend failing one call in five.
const (
	// defaultBackoffBase is the delay after the first failure in a row;
	// each further one doubles it.
	defaultBackoffBase = 100 * time.Millisecond
	// defaultBackoffMax caps the delay; SetupWithManager makes it the
	// resync period, so a failing Proxy is tried at least as often as a
	// Ready one is read.
	defaultBackoffMax = time.Minute
)

// laneBackoff is a lane's transient failures in a row and when its next
// operation may call the provider.
type laneBackoff struct {
	failures int
	until    time.Time
}

// backOff records how the lane's operation ended: a transient error
// delays the next one, twice as long as the last; success forgets the
// failures. A quota or permanent error leaves the count as it is: the
// reconcile waits out its own class's delay (Timing.QuotaBackoff,
// Timing.PermanentRetry). o.mu is held.
func (o *Runner) backOff(lane types.UID, err error) {
	switch {
	case err == nil:
		delete(o.backoffs, lane)
	case contract.ClassOf(err) == contract.ClassTransient:
		b := o.backoffs[lane]
		b.failures++
		b.until = time.Now().Add(backoffDelay(o.backoffBase, o.BackoffMax, b.failures))
		o.backoffs[lane] = b
	}
}

// ResetBackoffs forgets every lane's failures and ends the waits of the
// operations backing off: what failed them may be gone (a credential
// Secret that appeared or was rotated; CredentialsWatcher), and a lane
// that had failed nine times in a row would otherwise wait 25.6 s more
// (a regression: a late Secret served 22 s after it appeared).
func (o *Runner) ResetBackoffs() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.backoffs)
	close(o.backoffsReset)
	o.backoffsReset = make(chan struct{})
}

// backoffDelay is base doubled for each failure after the first, at most
// max.
func backoffDelay(base, maxDelay time.Duration, failures int) time.Duration {
	d := base
	for i := 1; i < failures && d < maxDelay; i++ {
		d *= 2
	}
	return min(d, maxDelay)
}
