package contracttest

import (
	"context"
	"sync"
)

// Gate holds a fake backend's calls while stalled: a backend control
// implements Staller with Gate.Stall, and the backend (a fake API's
// handler, a proxy in front of a simulator) calls Pass at the start of
// every call. The zero value is open.
type Gate struct {
	mu      sync.Mutex
	stalled chan struct{} // closed on release; nil when open
	held    int           // calls waiting in Pass now
}

// Stall holds every call that passes the gate from now until release.
// A Stall while the gate is already stalled joins that stall: either
// release lets every held call go, so no caller is stranded.
func (g *Gate) Stall() (release func()) {
	g.mu.Lock()
	ch := g.stalled
	if ch == nil {
		ch = make(chan struct{})
		g.stalled = ch
	}
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.stalled == ch {
			g.stalled = nil
			close(ch)
		}
	}
}

// Pass returns at once when the gate is open; while it is stalled, when
// it is released (nil) or ctx is done (ctx's error).
func (g *Gate) Pass(ctx context.Context) error {
	g.mu.Lock()
	ch := g.stalled
	g.mu.Unlock()
	if ch == nil {
		return ctx.Err()
	}
	g.mu.Lock()
	g.held++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.held--
		g.mu.Unlock()
	}()
	select {
	case <-ch:
		return ctx.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Held is how many calls the gate holds now: a backend control
// implements Holder with it.
func (g *Gate) Held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}
