package providers

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Each provider runs at once and on its own interval; a hung provider does
// not hold the others up; Every returns when ctx ends.
func TestEvery(t *testing.T) {
	set := NewSet(&Entry{Name: "fast", CheckInterval: 10 * time.Millisecond}, &Entry{Name: "hung", CheckInterval: 10 * time.Millisecond})
	var mu sync.Mutex
	runs := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	set.Every(ctx, func(e *Entry) time.Duration { return e.CheckInterval }, func(ctx context.Context, e *Entry) {
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
