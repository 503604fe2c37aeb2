//go:build e2e

package e2e

import (
	"testing"
	"time"
)

// within calls done every interval until it reports true, and ends the
// test saying what did not happen (and done's last word on it) when limit
// passes first.
func within(t *testing.T, limit, interval time.Duration, what string, done func() (bool, string)) {
	t.Helper()
	start := time.Now()
	for {
		ok, last := done()
		if ok {
			return
		}
		if time.Since(start) > limit {
			t.Fatalf("%s: not after %s (%s)", what, limit, last)
		}
		time.Sleep(interval)
	}
}
