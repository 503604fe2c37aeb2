package vsphere

import (
	"context"
	"errors"
	"os"
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

// A changed credential file makes the provider log in again; the session
// it replaces is logged out, not left to idle out on vCenter, which
// limits the sessions a user may hold (before, every rotation left one).
func TestReplacedSessionIsLoggedOut(t *testing.T) {
	v := startVcsim(t)
	p := v.provider(t)
	ctx := context.Background()
	get := func(when string) {
		t.Helper()
		if _, err := p.Get(ctx, "dc0/absent"); !errors.Is(err, contract.ErrNotFound) {
			t.Fatalf("Get %s = %v, want NotFound (no such VM)", when, err)
		}
	}
	get("on the first session")
	if n := v.sessionsOf(t, testUser); n != 1 {
		t.Fatalf("after the first login: %d sessions of %s, want 1", n, testUser)
	}
	// The Secret rewritten (kubelet swaps the file): a new modification
	// time is a change.
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(v.cfg.PasswordFile, later, later); err != nil {
		t.Fatal(err)
	}
	get("after the credential changed")
	n := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n = v.sessionsOf(t, testUser); n == 1 {
			break
		}
	}
	if n != 1 {
		t.Errorf("after the credential changed: %d sessions of %s, want 1 (the replaced one logged out)", n, testUser)
	}
	get("on the new session")
}
