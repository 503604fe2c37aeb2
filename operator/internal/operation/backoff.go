package operation

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"

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

// backoffJitter spreads the retries of lanes that failed together (a
// backend that went away for all of them) by up to a fifth of each delay,
// so they do not all call it again at the same instant.
const backoffJitter = 0.2

// backOff records how the lane's operation ended: a transient error
// delays the next one, twice as long as the last (client-go's
// flowcontrol.Backoff, jittered); success forgets the failures. A quota or
// permanent error leaves the delay as it is: the reconcile waits out its
// own class's delay (Timing.QuotaBackoff, Timing.PermanentRetry). o.mu is
// held.
func (o *Runner) backOff(lane types.UID, err error) {
	switch {
	case err == nil:
		if o.backoff != nil {
			o.backoff.Reset(string(lane))
		}
		delete(o.until, lane)
	case contract.ClassOf(err) == contract.ClassTransient:
		if o.backoff == nil {
			o.backoff = flowcontrol.NewBackOffWithJitter(o.backoffBase, o.BackoffMax, backoffJitter)
		}
		now := time.Now()
		o.backoff.Next(string(lane), now)
		o.until[lane] = now.Add(o.backoff.Get(string(lane)))
	}
}

// ResetBackoffs forgets every lane's failures and ends the waits of the
// operations backing off: what failed them may be gone (a credential
// Secret that appeared or was rotated; credentials.Watcher), and a lane
// that had failed nine times in a row would otherwise wait 25.6 s more
// (a regression: a late Secret served 22 s after it appeared).
func (o *Runner) ResetBackoffs() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.backoff = nil
	clear(o.until)
	close(o.backoffsReset)
	o.backoffsReset = make(chan struct{})
}
