package libvirt

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/images/fetch"
)

// TestFrozenDaemonIsDetected freezes the private libvirtd (SIGSTOP: its
// socket takes what is sent, nothing answers, as with a host that hangs
// or went away without closing its connections).
//   - A call on the open connection fails transient once keepalive gives
//     up on the connection (libvirt's "connection closed due to keepalive
//     timeout"), long before its budget; the close callback forgets the
//     connection. Without keepalive the call waited for its whole budget.
//   - Calls while the daemon stays frozen do not queue on the dead
//     connection: they open a new one, one open per region at a time
//     (virConnectOpen has no keepalive and no timeout), and return at
//     their ctx: at most one goroutine waits on the daemon, not one per
//     call.
//   - After SIGCONT the next call works, and every goroutine that waited
//     on the daemon has returned.
func TestFrozenDaemonIsDetected(t *testing.T) {
	l := privateDaemon(t)
	const budget = 90 * time.Second
	p, err := New(Config{
		Regions:           map[string]Region{"lab": {URI: l.uri, Pool: l.pool, Network: l.network}},
		MachineTypes:      map[string]MachineType{"small": {CPUs: 1, MemoryMiB: 256}},
		Images:            map[string]fetch.Entry{"proxy": {URL: "http://127.0.0.1:9/proxy.qcow2", SHA256: strings.Repeat("0", 64), Format: "qcow2"}},
		CallTimeout:       contract.Duration{Duration: budget},
		KeepaliveInterval: contract.Duration{Duration: time.Second},
		KeepaliveCount:    3,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := ids.Format("lab", "egress-frozen")
	if _, err := p.Get(ctx, id); !isNotFound(err) {
		t.Fatalf("Get before the freeze = %v, want ErrNotFound", err)
	}
	goroutines, threads := runtime.NumGoroutine(), osThreads(t)

	thaw := l.freeze(t)
	start := time.Now()
	_, err = p.Get(ctx, id)
	t.Logf("frozen daemon: Get failed after %s (keepalive 1 s × 3): %v", time.Since(start).Round(time.Millisecond), err)
	if errors.Is(err, context.DeadlineExceeded) || contract.ClassOf(err) != contract.ClassTransient || isNotFound(err) {
		t.Fatalf("Get on a frozen daemon = %v (class %s), want libvirt's transient connection error before the %s budget", err, contract.ClassOf(err), budget)
	}
	p.mu.Lock()
	closed, held := p.closed, p.conns["lab"]
	p.mu.Unlock()
	if closed == 0 || held != nil {
		t.Errorf("after keepalive closed the connection: %d close callbacks, connection held %v; want it forgotten by the callback", closed, held != nil)
	}

	const calls = 4
	var wg sync.WaitGroup
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if _, err := p.Get(cctx, id); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Get while frozen = %v, want its ctx's deadline", err)
			}
		}()
	}
	wg.Wait()
	// The Gets' own goroutines leave a moment after the Gets return.
	waiting := settle(goroutines+1) - goroutines
	waitingThreads := osThreads(t) - threads
	t.Logf("while frozen, after %d more Gets returned at their ctx: %d goroutines and %d OS threads more than before the freeze", calls, waiting, waitingThreads)
	if waiting > 1 {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines wait on the frozen daemon, want at most the one connect:\n%s", waiting, buf[:runtime.Stack(buf, true)])
	}

	thaw()
	if _, err := p.Get(ctx, id); !isNotFound(err) {
		t.Errorf("Get after SIGCONT = %v, want ErrNotFound on a new connection", err)
	}
	if left := settle(goroutines) - goroutines; left > 0 {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines still wait after SIGCONT:\n%s", left, buf[:runtime.Stack(buf, true)])
	}
}

// settle waits up to 10 s for the goroutine count to fall to want, and
// returns the count then.
func settle(want int) int {
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > want && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	return runtime.NumGoroutine()
}

// osThreads is the process's OS thread count (cgo calls that block hold
// one each).
func osThreads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if n, ok := strings.CutPrefix(line, "Threads:"); ok {
			var v int
			for _, r := range strings.TrimSpace(n) {
				v = v*10 + int(r-'0')
			}
			return v
		}
	}
	return 0
}
