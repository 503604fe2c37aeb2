package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// Each provider runs at once and on its own interval; a hung provider does
// not hold the others up; everyProvider returns when ctx ends.
func TestEveryProvider(t *testing.T) {
	set := providers.NewSet(&providers.Entry{Name: "fast", CheckInterval: 10 * time.Millisecond}, &providers.Entry{Name: "hung", CheckInterval: 10 * time.Millisecond})
	var mu sync.Mutex
	runs := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	everyProvider(ctx, set, func(e *providers.Entry) time.Duration { return e.CheckInterval }, func(ctx context.Context, e *providers.Entry) {
		mu.Lock()
		runs[e.Name]++
		mu.Unlock()
		if e.Name == "hung" {
			<-ctx.Done()
		}
	})
	if runs["hung"] != 1 || runs["fast"] < 5 {
		t.Errorf("runs %v: want the hung provider once and the fast one many times", runs)
	}
}
