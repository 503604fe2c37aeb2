package vsphere

import (
	"bytes"
	"context"
	"sync"
)

// heldCall is the next call of one SOAP method, held at the front before
// vcsim sees it, as vcsim's own method delay (simulator.DelayConfig's
// MethodDelay) holds it, but until the test lets it go rather than for a
// time: a test that waits on it asserts no time.
type heldCall struct {
	arrived  chan struct{} // closed when the call reaches the front
	released chan struct{} // closed to let it go on to vcsim
	once     sync.Once
}

// holdNext holds the next call of method at the front until the returned
// function is called (Reset calls it too), and returns a channel closed
// once the call has arrived. Only that one call: later calls of the
// method pass.
func (v *vcsim) holdNext(method string) (arrived <-chan struct{}, release func()) {
	h := &heldCall{arrived: make(chan struct{}), released: make(chan struct{})}
	v.mu.Lock()
	if v.holds == nil {
		v.holds = map[string]*heldCall{}
	}
	v.holds[method] = h
	v.mu.Unlock()
	return h.arrived, v.hold(func() {
		h.once.Do(func() { close(h.released) })
		v.mu.Lock()
		if v.holds[method] == h {
			delete(v.holds, method)
		}
		v.mu.Unlock()
	})
}

// holdHere holds the call whose body is body if holdNext asked for its
// method, until it is released or ctx is done.
func (v *vcsim) holdHere(ctx context.Context, body []byte) error {
	v.mu.Lock()
	var h *heldCall
	for method, held := range v.holds {
		// The SOAP body names the method as an element: <Login xmlns=...>.
		if bytes.Contains(body, []byte("<"+method+" ")) {
			h = held
			delete(v.holds, method)
			break
		}
	}
	v.mu.Unlock()
	if h == nil {
		return nil
	}
	close(h.arrived)
	select {
	case <-h.released:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// isListing tells a folder listing's first page: RetrievePropertiesEx
// through the folder's ContainerView (reads.go readFolder), not a read of
// one VM (readVMs).
func isListing(body []byte) bool {
	return bytes.Contains(body, []byte("<RetrievePropertiesEx ")) && bytes.Contains(body, []byte("<type>ContainerView</type>"))
}

// HoldListings holds every folder listing after vcsim answered it, until
// release.
func (c control) HoldListings() func() { return c.v.listGate.Stall() }

// HeldListings is how many folder listings the front holds now.
func (c control) HeldListings() int { return c.v.listGate.Held() }

// Listings counts the folder listings begun at the front.
func (c control) Listings() int { return int(c.v.listings.Load()) }
