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

	"libvirt.org/go/libvirt"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/images/fetch"
)

// TestFrozenDaemonIsDetected freezes the private libvirtd (SIGSTOP: its
// socket takes what is sent, nothing answers, as with a host that hangs
// or went away without closing its connections), and makes four Gets at
// once (budget 90 s, ctx 8 s).
//   - The call on the open connection fails transient once keepalive
//     gives up on the connection (libvirt's "connection closed due to
//     keepalive timeout"), long before its budget; the close callback
//     forgets the connection. Without keepalive it waited for its budget.
//   - The other calls took turns behind it (one call per connection at a
//     time: with several waiting when keepalive closes it, libvirt 9.0's
//     client wakes only one and can crash when the daemon answers the
//     others later), then wait for one connect (virConnectOpen has no
//     keepalive and no timeout) and return at their ctx: at most one
//     goroutine waits on the daemon, not one per call.
//   - After SIGCONT the next call works, every goroutine that waited on
//     the daemon has returned, and the process is alive.
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
	const calls = 4
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 8*time.Second)
			defer cancel()
			_, errs[i] = p.Get(cctx, id)
		}()
	}
	wg.Wait()
	t.Logf("frozen daemon: %d Gets at once returned after %s (keepalive 1 s × 3, ctx 8 s): %v", calls, time.Since(start).Round(time.Millisecond), errs)
	keepalive := 0
	for i, err := range errs {
		switch {
		case contract.ClassOf(err) != contract.ClassTransient || isNotFound(err):
			t.Errorf("Get %d on a frozen daemon = %v (class %s), want transient", i, err, contract.ClassOf(err))
		case !errors.Is(err, context.DeadlineExceeded):
			keepalive++ // libvirt's "connection closed due to keepalive timeout"
		}
	}
	if keepalive != 1 {
		t.Errorf("%d Gets failed with the daemon's connection error, want 1 (the call on the open connection, before its %s budget); the others wait their turn or the one connect, and return at their ctx", keepalive, budget)
	}
	p.mu.Lock()
	closed, held := p.closed, p.conns[slotKey("lab", 0)]
	p.mu.Unlock()
	if closed == 0 || held != nil {
		t.Errorf("after keepalive closed the connection: %d close callbacks, connection held %v; want it forgotten by the callback", closed, held != nil)
	}
	// The Gets' own goroutines leave a moment after the Gets return.
	waiting := settle(goroutines+1) - goroutines
	t.Logf("while frozen: %d goroutines and %d OS threads more than before the freeze", waiting, osThreads(t)-threads)
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

// TestASlowCallDoesNotHoldTheHost holds one call on the region's
// connection, as a daemon holds a domain call (a job-lock wait of up to
// 30 s, a destroy of a QEMU in D state, an agent query): another Proxy's
// Get on the same host is answered within its budget, on a connection of
// its own. With one connection a host, every other call waited its turn
// behind the held one and failed at its budget.
func TestASlowCallDoesNotHoldTheHost(t *testing.T) {
	b := newTestBackend(t)
	p := b.provider(t)
	ctx := context.Background()
	held, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- p.call(ctx, backendCall{step: "HeldCall", region: testRegion}, time.Minute, func(*libvirt.Connect) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	defer func() {
		close(release)
		if err := <-done; err != nil {
			t.Errorf("the held call: %v", err)
		}
	}()
	id := ids.Format(testRegion, "egress-beside-a-held-call")
	for range 3 {
		if _, err := p.Get(ctx, id); !isNotFound(err) {
			t.Fatalf("Get beside a held call = %v (class %s); want ErrNotFound within its %s budget", err, contract.ClassOf(err), b.cfg.CallTimeout.Duration)
		}
	}
	p.mu.Lock()
	open := len(p.conns)
	p.mu.Unlock()
	if open != 2 {
		t.Errorf("%d connections open to the host; want 2, the held call's and one for the Gets after it", open)
	}
}
