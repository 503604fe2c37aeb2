package readiness

import (
	"testing"
	"time"
)

// Failures count in a row until an answer; a drain starts at its first
// look and runs down from there.
func TestFailuresAndDrains(t *testing.T) {
	var m Memory
	for want := 1; want <= 3; want++ {
		if got := m.Failed("dc0/a"); got != want {
			t.Fatalf("failure %d counted as %d", want, got)
		}
	}
	m.Answered("dc0/a")
	if got := m.Failed("dc0/a"); got != 1 {
		t.Errorf("after an answer, a failure counts as %d, want 1", got)
	}
	if got := m.Drain("dc0/a", time.Minute); got != time.Minute {
		t.Errorf("a new drain has %v left, want the whole minute", got)
	}
	time.Sleep(20 * time.Millisecond)
	if got := m.Drain("dc0/a", time.Minute); got >= time.Minute || got < 50*time.Second {
		t.Errorf("a drain begun 20ms ago has %v left", got)
	}
	if got := m.Drain("dc0/a", 10*time.Millisecond); got != 0 {
		t.Errorf("a drain longer than its period has %v left, want 0", got)
	}
}

// Forget, which every place that deletes a VM calls (a replacement's old
// VM, a scaled-away replica, a retired VM, a Proxy's sweep), drops that
// VM's failed probes in a row and its drain, and only that VM's.
func TestForgetDropsOneVMsState(t *testing.T) {
	var m Memory
	m.Failed("dc0/gone")
	m.Drain("dc0/gone", time.Minute)
	m.Failed("dc0/kept")
	m.Forget("dc0/gone")
	if _, ok := m.failures["dc0/gone"]; ok {
		t.Error("the deleted VM's failed probes are still counted")
	}
	if _, ok := m.left["dc0/gone"]; ok {
		t.Error("the deleted VM's drain is still kept")
	}
	if m.failures["dc0/kept"] != 1 {
		t.Error("another VM's failed probes were forgotten")
	}
}

// A VM that serves again ends its drain: when it leaves the Service
// again, it drains the whole period from then, however long ago the first
// drain began; another VM's drain runs on.
func TestServesEndsADrain(t *testing.T) {
	var m Memory
	m.Drain("dc0/back", 10*time.Millisecond)
	m.Drain("dc0/other", time.Minute)
	time.Sleep(20 * time.Millisecond)
	m.Serves("dc0/back")
	if got := m.Drain("dc0/back", 10*time.Millisecond); got != 10*time.Millisecond {
		t.Errorf("a VM that served again and left has %v of its drain left, want the whole 10ms", got)
	}
	if got := m.Drain("dc0/other", time.Minute); got >= time.Minute {
		t.Errorf("another VM's drain began again (%v left)", got)
	}
}
