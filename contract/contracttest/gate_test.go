package contracttest

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestGate(t *testing.T) {
	var g Gate
	if err := g.Pass(context.Background()); err != nil {
		t.Fatalf("an open gate held a call: %v", err)
	}
	release := g.Stall()
	passed := make(chan error, 1)
	go func() { passed <- g.Pass(context.Background()) }()
	select {
	case err := <-passed:
		t.Fatalf("a stalled gate let a call through: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	if err := <-passed; err != nil {
		t.Fatalf("released call: %v", err)
	}
	release() // twice is harmless

	g.Stall()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := g.Pass(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a held call whose ctx ended = %v, want its deadline error", err)
	}
}

// A second Stall joins the first: releasing it lets the calls the first
// held go, as a control's Reset (Stall()()) relies on.
func TestGateStallTwice(t *testing.T) {
	var g Gate
	first := g.Stall()
	defer first()
	passed := make(chan error, 1)
	go func() { passed <- g.Pass(context.Background()) }()
	time.Sleep(20 * time.Millisecond) // let the call reach the gate
	g.Stall()()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	select {
	case err := <-passed:
		if err != nil {
			t.Fatalf("released call: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("a call held by the first Stall is still held after a second Stall was released")
	}
}

// Held counts the calls waiting at the stall, and only those.
func TestGateHeld(t *testing.T) {
	var g Gate
	_ = g.Pass(context.Background())
	if n := g.Held(); n != 0 {
		t.Fatalf("an open gate holds %d calls, want 0", n)
	}
	release := g.Stall()
	passed := make(chan error, 2)
	for range 2 {
		go func() { passed <- g.Pass(context.Background()) }()
	}
	for deadline := time.Now().Add(5 * time.Second); g.Held() != 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("two calls at a stalled gate: Held = %d, want 2", g.Held())
		}
	}
	release()
	for range 2 {
		if err := <-passed; err != nil {
			t.Fatalf("released call: %v", err)
		}
	}
	if n := g.Held(); n != 0 {
		t.Fatalf("after release Held = %d, want 0", n)
	}
}
