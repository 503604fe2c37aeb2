package controller

import (
	"context"
	"sync"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// everyProvider runs work for each configured provider in a goroutine of
// its own, once at once and then every interval(e), until ctx ends: a slow
// or hung backend delays only its own provider's rounds.
func everyProvider(ctx context.Context, set *providers.Set, interval func(*providers.Entry) time.Duration, work func(context.Context, *providers.Entry)) {
	var wg sync.WaitGroup
	for _, e := range set.All() {
		wg.Go(func() {
			t := time.NewTicker(interval(e))
			defer t.Stop()
			for {
				work(ctx, e)
				// A round that ended with ctx must not start another, even
				// if a tick is waiting too (select would pick at random).
				if ctx.Err() != nil {
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		})
	}
	wg.Wait()
}
