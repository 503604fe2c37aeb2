package openstack

import (
	"context"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// TestRealWireOnFake checks the real-cloud wire's own mechanics on osfake,
// where the cloud's side can be seen: a cut before the API never reaches
// it, a cut after it does and loses the answer, a stalled call ends with
// its context, a rewrite reaches the API as rewritten and its undo runs.
func TestRealWireOnFake(t *testing.T) {
	c := startCloud(t)
	w := newWire()
	p := c.provider(t)
	p.wrapTransport = w.wrap
	ctx := context.Background()
	inst, err := p.Create(ctx, request("wire-first"))
	if err != nil {
		t.Fatal(err)
	}

	before := c.fake.Calls()
	w.cutCall(1, false)
	if _, err := p.Get(ctx, inst.ProviderID); err == nil || contract.ClassOf(err) != contract.ClassTransient {
		t.Errorf("Get with the call cut before = %v, want a transient error", err)
	}
	if got := c.fake.Calls(); got != before {
		t.Errorf("a call cut before the API reached it: fake calls %d → %d", before, got)
	}

	w.cutCall(1, true)
	if err := p.Delete(ctx, inst.ProviderID); err == nil {
		t.Error("Delete with the answer cut after returned no error")
	}
	if got := c.fake.Calls(); got != before+1 {
		t.Errorf("a call cut after did not reach the API: fake calls %d → %d", before, got)
	}

	release := w.stall()
	stalled, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = p.Get(stalled, inst.ProviderID)
	cancel()
	release()
	if err == nil {
		t.Error("Get through a stalled wire returned no error")
	}

	undone := false
	w.add(&wireFault{method: http.MethodGet, path: regexp.MustCompile(`/servers/[0-9a-f-]{36}$`),
		rewrite: func(r *http.Request) { r.URL.Path = serverPathRE.ReplaceAllString(r.URL.Path, "/servers/"+newUUID()) },
		undo:    func() { undone = true }})
	if _, err := p.Get(ctx, inst.ProviderID); contract.ClassOf(err) != contract.ClassNotFound {
		t.Errorf("Get sent for a missing server = %v, want ErrNotFound from the API", err)
	}
	if !undone {
		t.Error("the fault's undo did not run")
	}
	if n := w.Calls(); n < 5 {
		t.Errorf("the wire counted %d calls", n)
	}
}
