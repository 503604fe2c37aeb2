package vsphere

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// A call waits for the session another call is logging in for only as
// long as its own ctx allows (contract §1.5, prompt return): a slow
// vCenter login must not stall every call up to the call timeout. The
// front holds the login until the test lets it go.
func TestWaitForLoginHonoursContext(t *testing.T) {
	v := startVcsim(t)
	cfg := v.cfg
	cfg.CallTimeout = contract.Duration{Duration: time.Minute} // the held login is not cut short
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	arrived, release := v.holdNext("Login")
	defer release()
	first := make(chan error, 1)
	go func() {
		_, err := p.Get(context.Background(), "dc0/absent")
		first <- err
	}()
	<-arrived

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	second := make(chan error, 1)
	go func() {
		_, err := p.Get(ctx, "dc0/absent")
		second <- err
	}()
	select {
	case err := <-second:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Get whose ctx ended while another call's login was held = %v, want its ctx's error", err)
		}
	case <-time.After(20 * time.Second):
		// Not a timing assertion: the call never returned while the
		// login was held (the old code waited on the mutex for it).
		t.Error("Get whose ctx ended did not return while another call's login was held")
	}
	select {
	case err := <-first:
		t.Fatalf("the first Get ended (%v) while its login was held", err)
	default:
	}
	release()
	if err := <-first; !errors.Is(err, contract.ErrNotFound) {
		t.Errorf("the first Get, its login let go = %v, want NotFound (no such VM)", err)
	}
	// The session the first call made serves the next one.
	if _, err := p.Get(context.Background(), "dc0/absent"); !errors.Is(err, contract.ErrNotFound) {
		t.Errorf("Get on the session made = %v, want NotFound", err)
	}
}
