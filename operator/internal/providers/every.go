package providers

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// everyJitter spreads each entry's rounds by up to a tenth of its
// interval, so the GC's and the health checker's rounds of many entries,
// or of two operator releases started together, do not fall on the same
// instant for ever.
const everyJitter = 0.1

// Every runs work for each entry in a goroutine of its own, at once and
// then interval(e) after each round ends (jittered), until ctx ends: a
// slow or hung backend delays only its own entry's rounds. A round that
// ends with ctx starts no other.
func (s *Set) Every(ctx context.Context, interval func(*Entry) time.Duration, work func(context.Context, *Entry)) {
	var wg sync.WaitGroup
	for _, e := range s.All() {
		wg.Go(func() {
			wait.JitterUntilWithContext(ctx, func(ctx context.Context) { work(ctx, e) }, interval(e), everyJitter, true)
		})
	}
	wg.Wait()
}
