package vsphere

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// soapMethodRE finds a SOAP call's method: the first element in the Body.
var soapMethodRE = regexp.MustCompile(`<(?:\w+:)?Body[^>]*>\s*<(?:\w+:)?(\w+)`)

// methodLog records the SOAP methods that pass the front while it is set.
type methodLog struct {
	mu      sync.Mutex
	methods []string
}

func (l *methodLog) watch(v *vcsim) (stop func()) {
	var tap tapFunc = func(_ *http.Request, call, _ []byte) {
		m := "?"
		if s := soapMethodRE.FindSubmatch(call); s != nil {
			m = string(s[1])
		}
		l.mu.Lock()
		l.methods = append(l.methods, m)
		l.mu.Unlock()
	}
	v.tap.Store(&tap)
	return func() { v.tap.Store(nil) }
}

// TestCallsPerStep pins the SOAP calls of the steps a Proxy's life makes
// once the session and the folder are known (the fleet benchmark,
// docs/performance.md). A listing reads each region's folder view in one
// call (the first makes them); a Get and a Delete read the VM by the
// reference the provider remembers; a Delete is then its three tasks (the
// deleting mark, the power-off, the destroy), each a call and govmomi's
// Task.Wait, five calls on a property collector of its own (waitTask: 19
// a Delete; reads of the task's info instead made it 7 here, where the
// front answers a task's call once the task ended, and 31 against 22 with
// tasks of a second, hack/bench-vsphere-tasks.sh). The methods are
// logged.
func TestCallsPerStep(t *testing.T) {
	v := startVcsim(t)
	p := v.provider(t)
	ctx := context.Background()
	inst := createVM(t, p, "counted", "uid-counted", testOwner)
	step := func(what string, most int, fn func() error) {
		t.Helper()
		var l methodLog
		stop := l.watch(v)
		err := fn()
		stop()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s: %d SOAP calls: %s", what, len(l.methods), strings.Join(l.methods, " "))
		if len(l.methods) == 0 || (most > 0 && len(l.methods) > most) {
			t.Errorf("%s made %d SOAP calls (%s), want 1 to %d", what, len(l.methods), strings.Join(l.methods, " "), most)
		}
	}
	list := func() error { _, err := p.ListByTag(ctx, contract.LabelUID, "uid-counted"); return err }
	// The first listing of each folder makes its view, and finds the
	// folders of the regions no Create has used yet.
	regions := len(p.cfg.Regions)
	step("ListByTag(uid), the session's first", 0, list)
	step("ListByTag(uid)", regions, list)
	step("Get", 1, func() error { _, err := p.Get(ctx, inst.ProviderID); return err })
	step("Delete", 19, func() error { return p.Delete(ctx, inst.ProviderID) })
	step("ListByTag(uid) after", regions, list)
	var gone methodLog
	stop := gone.watch(v)
	_, err := p.Get(ctx, inst.ProviderID)
	stop()
	if !errors.Is(err, contract.ErrNotFound) {
		t.Fatalf("Get after Delete = %v, want ErrNotFound", err)
	}
	t.Logf("Get after Delete: %s", strings.Join(gone.methods, " "))
}

// TestConnectionsAreKept: calls at once reuse their connections to vCenter
// once made. With net/http's two idle connections a host, every answer
// beyond the second closed its connection and the next call made a new one,
// a TLS handshake each (the fleet benchmark's operator, docs/performance.md).
func TestConnectionsAreKept(t *testing.T) {
	v := startVcsim(t)
	p := v.provider(t)
	ctx := context.Background()
	inst := createVM(t, p, "kept", "uid-kept", testOwner)
	const atOnce = 16
	// Each round holds its Gets at the front until all are in flight, so
	// every round needs atOnce connections at the same moment whatever
	// the machine's load (without the hold, a loaded machine ran the
	// first round's Gets partly one after another, a later round needed
	// more connections than the first had made, and the test failed).
	round := func() {
		release := v.hold(v.gate.Stall())
		var wg sync.WaitGroup
		for range atOnce {
			wg.Go(func() {
				if _, err := p.Get(ctx, inst.ProviderID); err != nil {
					t.Error(err)
				}
			})
		}
		for deadline := time.Now().Add(time.Minute); v.gate.Held() < atOnce; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				release()
				t.Fatalf("only %d of %d Gets reached vCenter at once in a minute", v.gate.Held(), atOnce)
			}
		}
		release()
		wg.Wait()
	}
	round() // makes up to atOnce connections
	before := v.conns.Load()
	for range 5 {
		round()
	}
	if made := v.conns.Load() - before; made > 0 {
		t.Errorf("five more rounds of %d Gets at once made %d connections to vCenter, want none: those of the first round stay open", atOnce, made)
	}
}
