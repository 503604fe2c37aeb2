package contracttest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// env is one rule's world: a provider, what it logged, the spans it made,
// the errors it returned and the instances to clean up afterwards.
type env struct {
	t     *testing.T
	cfg   Config
	p     contract.Provider
	logs  *logSink
	spans *spanRecorder

	mu       sync.Mutex
	errs     []error
	messages []string // every Instance.Message the provider returned
	created  []string
	uids     []string    // every UID a Create was asked for, found again at cleanup
	owners   []string    // every Owner a Create was asked for, listed at cleanup
	owner    string      // the Owner of this rule's requests
	draw     *mrand.Rand // the rule's shapes (Config.Seed)
	foreign  []string    // unmarked instances the control made
	seq      int
	globals  *globalOutput // set while a rule captures process-wide output
}

// newEnv makes a rule's world: the control reset to a behaving backend,
// a provider, and at the end the rule's instances deleted and the backend
// checked to hold no more than it held when the rule began.
func newEnv(t *testing.T, cfg Config) *env {
	e := &env{t: t, cfg: cfg, logs: &logSink{}, spans: newSpanRecorder(), owner: newOwner(cfg), draw: newDraw(t, cfg.Seed)}
	if r, ok := cfg.Backend.(Resetter); ok {
		r.Reset()
	}
	var baseline []string
	inv, hasInventory := cfg.Backend.(Inventory)
	if hasInventory {
		baseline = resources(e, inv)
	}
	t.Cleanup(func() {
		if r, ok := cfg.Backend.(Resetter); ok {
			r.Reset()
		}
		e.cleanup()
		if hasInventory {
			e.expectNoMoreThan(inv, baseline, "the rule")
		}
	})
	e.p = cfg.NewProvider(t)
	return e
}

// ctx is what the operator passes: its logger, carrying the provider key,
// and no deadline (contract §1.5).
func (e *env) ctx() context.Context {
	log := e.logs.logger().WithValues(contract.LogKeyProvider, "contracttest")
	return logr.NewContext(context.Background(), log)
}

// request returns a valid CreateRequest with a name and UID unique to this
// rule and call, and the rule's Owner.
func (e *env) request() contract.CreateRequest {
	return e.requestIn(e.cfg.Placement)
}

// requestIn is request in another placement.
func (e *env) requestIn(pl contract.Placement) contract.CreateRequest {
	e.mu.Lock()
	e.seq++
	n := e.seq
	e.mu.Unlock()
	name := fmt.Sprintf("%s-%s-%d", e.cfg.NamePrefix, randomHex(3), n)
	return contract.CreateRequest{
		Name:      name,
		UID:       newUID(),
		Owner:     e.owner,
		Placement: pl,
		// Each request's own, so that a guest given another's is seen.
		CloudInit: []byte("#cloud-config\n# " + name + "\npackages: [tinyproxy]\n"),
		Port:      3128,
	}
}

// placements is every placement the harness was given: Placement first.
func (e *env) placements() []contract.Placement {
	return append([]contract.Placement{e.cfg.Placement}, e.cfg.OtherPlacements...)
}

// op runs one provider call under an operation span, as the operator does,
// and records the error it returns.
func (e *env) op(ctx context.Context, name string, call func(context.Context) error) (trace.SpanContext, error) {
	ctx, span := contract.StartOperation(ctx, e.spans.tp, name)
	err := call(ctx)
	contract.EndSpan(span, err)
	if err != nil {
		e.mu.Lock()
		e.errs = append(e.errs, err)
		e.mu.Unlock()
	}
	return span.SpanContext(), err
}

// remember records req's UID and Owner, so that cleanup finds whatever
// was made for it even when the call that made it failed.
func (e *env) remember(req contract.CreateRequest) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !slices.Contains(e.uids, req.UID) {
		e.uids = append(e.uids, req.UID)
	}
	if validOwner(req.Owner) && !slices.Contains(e.owners, req.Owner) {
		e.owners = append(e.owners, req.Owner)
	}
}

func (e *env) create(ctx context.Context, p contract.Provider, req contract.CreateRequest) (contract.Instance, error) {
	e.remember(req)
	var inst contract.Instance
	_, err := e.op(ctx, "Create", func(ctx context.Context) (err error) {
		inst, err = p.Create(ctx, req)
		return err
	})
	if err == nil {
		e.track(inst.ProviderID)
		e.checkInstance("Create", inst)
		if inst.Name != req.Name || inst.UID != req.UID {
			e.t.Errorf("Create returned name %q UID %q, want %q %q", inst.Name, inst.UID, req.Name, req.UID)
		}
		if inst.State != contract.StateProvisioning && inst.State != contract.StateRunning {
			e.t.Errorf("Create returned state %s, want Provisioning or Running", inst.State)
		}
	}
	return inst, err
}

func (e *env) get(ctx context.Context, p contract.Provider, id string) (contract.Instance, error) {
	var inst contract.Instance
	_, err := e.op(ctx, "Get", func(ctx context.Context) (err error) {
		inst, err = p.Get(ctx, id)
		return err
	})
	if err == nil {
		e.checkInstance("Get", inst)
		if inst.ProviderID != id {
			e.t.Errorf("Get(%q) returned providerID %q", id, inst.ProviderID)
		}
	}
	return inst, err
}

func (e *env) delete(ctx context.Context, p contract.Provider, id string) error {
	_, err := e.op(ctx, "Delete", func(ctx context.Context) error { return p.Delete(ctx, id) })
	return err
}

func (e *env) list(ctx context.Context, p contract.Provider, key, value string) ([]contract.Instance, error) {
	var out []contract.Instance
	_, err := e.op(ctx, "ListByTag", func(ctx context.Context) (err error) {
		out, err = p.ListByTag(ctx, key, value)
		return err
	})
	for _, inst := range out {
		e.checkInstance("ListByTag", inst)
		if key == contract.LabelUID && inst.UID != value && inst.State != contract.StateTerminated {
			e.t.Errorf("ListByTag(%s, %s) returned %s, whose UID is %q", key, value, inst.ProviderID, inst.UID)
		}
		if key == contract.LabelManaged && inst.Owner != value && inst.State != contract.StateTerminated {
			e.t.Errorf("ListByTag(%s, %s) returned %s, whose managed mark is %q: only an exact match is listed", key, value, inst.ProviderID, inst.Owner)
		}
	}
	return out, err
}

// mustCreate creates req and fails the rule on error.
func (e *env) mustCreate(req contract.CreateRequest) contract.Instance {
	e.t.Helper()
	inst, err := e.create(e.ctx(), e.p, req)
	if err != nil {
		e.t.Fatalf("Create(%s): %v", req.Name, err)
	}
	return inst
}

// running creates req, plays the guest reporting its address, and waits
// until Get says Running.
func (e *env) running(req contract.CreateRequest) contract.Instance {
	e.t.Helper()
	guest := need[GuestReporter](e.t, e.cfg.Backend)
	inst := e.mustCreate(req)
	if err := guest.ReportIP(e.ctx(), inst.ProviderID, e.cfg.GuestIP); err != nil {
		e.t.Fatalf("backend control ReportIP: %v", err)
	}
	return e.waitState(inst.ProviderID, contract.StateRunning)
}

// waitState polls Get until the instance reaches want.
func (e *env) waitState(id string, want contract.State) contract.Instance {
	e.t.Helper()
	var last contract.Instance
	var err error
	deadline := time.Now().Add(e.cfg.WaitTimeout)
	for time.Now().Before(deadline) {
		last, err = e.get(e.ctx(), e.p, id)
		if err == nil && last.State == want {
			return last
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("%s did not reach %s within %s: last state %q, error %v", id, want, e.cfg.WaitTimeout, last.State, err)
	return last
}

// waitGone polls Get after a Delete until it returns ErrNotFound; every
// answer before that must be StateTerminated.
func (e *env) waitGone(p contract.Provider, id string) {
	e.t.Helper()
	deadline := time.Now().Add(e.cfg.WaitTimeout)
	for {
		inst, err := e.get(e.ctx(), p, id)
		switch {
		case errors.Is(err, contract.ErrNotFound):
			return
		case err == nil && inst.State != contract.StateTerminated:
			e.t.Fatalf("Get after Delete of %s returned state %s (%q), want Terminated or ErrNotFound", id, inst.State, inst.Message)
		case err != nil && contract.ClassOf(err) != contract.ClassTransient:
			e.t.Fatalf("Get after Delete returned %v (class %s), want ErrNotFound", err, contract.ClassOf(err))
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("Get after Delete still finds %s after %s", id, e.cfg.WaitTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkInstance holds every Instance a provider returns to the contract's
// invariants (§3).
func (e *env) checkInstance(call string, inst contract.Instance) {
	e.t.Helper()
	if inst.Message != "" {
		e.mu.Lock()
		e.messages = append(e.messages, inst.Message)
		e.mu.Unlock()
	}
	if inst.State != contract.StateTerminated && (inst.Name == "" || inst.UID == "" || inst.Owner == "" || inst.CreatedAt.IsZero()) {
		e.t.Errorf("%s returned %s (%s) with name %q, UID %q, Owner %q, CreatedAt %v: a live instance carries all four, read from the backend (§8)",
			call, inst.ProviderID, inst.State, inst.Name, inst.UID, inst.Owner, inst.CreatedAt)
	}
	if !inst.State.Valid() {
		e.t.Errorf("%s returned state %q, not one of %v", call, inst.State, contract.States)
	}
	if inst.ProviderID == "" {
		e.t.Errorf("%s returned an instance without a providerID", call)
	}
	if inst.State == contract.StateRunning && !contract.RoutableIPv4(inst.IP) {
		e.t.Errorf("%s returned %s Running with IP %q: Running requires a routable IPv4 address", call, inst.ProviderID, inst.IP)
	}
	if inst.IP != "" && !contract.RoutableIPv4(inst.IP) {
		e.t.Errorf("%s returned %s with IP %q: only routable IPv4 is reported", call, inst.ProviderID, inst.IP)
	}
}

func (e *env) track(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, known := range e.created {
		if known == id {
			return
		}
	}
	e.created = append(e.created, id)
}

// cleanup deletes every instance the rule made, with a fresh provider so a
// provider the rule broke on purpose does not leak instances.
func (e *env) cleanup() {
	if foreign, ok := e.cfg.Backend.(UnmarkedCreator); ok {
		for _, id := range e.foreign {
			switch err := foreign.DeleteUnmarked(context.Background(), id); {
			case errors.Is(err, contract.ErrNotFound):
				e.t.Errorf("the unmarked instance %s is gone: the provider removed an instance that is not the operator's (%v)", id, err)
			case err != nil:
				e.t.Errorf("cleanup: backend control DeleteUnmarked(%s): %v", id, err)
			}
		}
	}
	if len(e.uids) == 0 {
		return
	}
	p := e.cfg.NewProvider(e.t)
	// A Create that failed may still have made its instance: find every
	// instance made for one of the rule's requests by its UID, under every
	// Owner the rule used, and under the legacy mark a provider that does
	// not write the Owner yet (or the control's LegacyCreator) leaves.
	for _, owner := range append(slices.Clone(e.owners), contract.LegacyManagedValue) {
		found, err := p.ListByTag(e.ctx(), contract.LabelManaged, owner)
		if err != nil {
			e.t.Errorf("cleanup: ListByTag(%s, %s): %v", contract.LabelManaged, owner, err)
		}
		for _, inst := range found {
			if slices.Contains(e.uids, inst.UID) {
				e.track(inst.ProviderID)
			}
		}
	}
	for _, id := range e.created {
		ctx, cancel := context.WithTimeout(e.ctx(), e.cfg.WaitTimeout)
		err := p.Delete(ctx, id)
		for err == nil {
			_, err = p.Get(ctx, id)
			if err == nil {
				time.Sleep(20 * time.Millisecond)
			}
		}
		cancel()
		if !errors.Is(err, contract.ErrNotFound) {
			e.t.Errorf("cleanup: %s was not deleted: %v", id, err)
		}
	}
	// Then what the operator releases once a Proxy's instances are gone.
	if err := e.releaseEgress(p, append(slices.Clone(e.owners), contract.LegacyManagedValue), e.uids); err != nil {
		e.t.Errorf("cleanup: releasing the rule's egress addresses: %v", err)
	}
}

// trackForeign records an unmarked instance the control made, for the
// control to remove when the rule ends.
func (e *env) trackForeign(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.foreign = append(e.foreign, id)
}

// texts returns everything the provider produced that a person or a
// collector can read: log lines, span contents, error texts, instance
// messages and, while a rule captures it, process-wide output (stderr, the
// standard and slog loggers, OpenTelemetry's error handler).
func (e *env) texts() []string {
	out := e.logs.snapshot()
	out = append(out, e.spans.texts()...)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, err := range e.errs {
		out = append(out, errorTexts(err)...)
	}
	out = append(out, e.messages...)
	if e.globals != nil {
		out = append(out, e.globals.text())
	}
	return out
}

// assertAbsent fails the rule if secret, or secret as base64 or hex
// encoding carries it, appears in anything the provider produced, or in
// a gzip stream in it (unpacked).
func (e *env) assertAbsent(what, secret string) {
	e.t.Helper()
	forms := encodings(secret)
	for _, text := range e.texts() {
		found := ""
		for _, form := range forms {
			if strings.Contains(text, form.text) {
				found = form.how
				break
			}
		}
		for _, inner := range unpacked(text) {
			if found == "" && strings.Contains(inner, secret) {
				found = "gzip-compressed"
			}
		}
		if found != "" {
			e.t.Errorf("the %s sentinel appears %s in provider output: %.300q", what, found, text)
		}
	}
}

// expectNoMoreThan polls the inventory until it holds nothing that
// baseline does not, and fails naming what stayed.
func (e *env) expectNoMoreThan(inv Inventory, baseline []string, who string) {
	e.t.Helper()
	deadline := time.Now().Add(e.cfg.WaitTimeout)
	for {
		var extra []string
		for _, r := range resources(e, inv) {
			if !slices.Contains(baseline, r) {
				extra = append(extra, r)
			}
		}
		if len(extra) == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Errorf("%s left behind on the backend: %v", who, extra)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// calls returns the backend's call count, or -1 without a CallCounter.
func (e *env) calls() int {
	if c, ok := e.cfg.Backend.(CallCounter); ok {
		return c.Calls()
	}
	return -1
}

// need returns the backend control as capability T, or skips the rule
// naming the missing capability.
func need[T any](t *testing.T, backend any) T {
	t.Helper()
	c, ok := backend.(T)
	if !ok {
		t.Skipf("skipped: the backend control does not implement contracttest.%s", reflect.TypeFor[T]().Name())
	}
	return c
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

// newOwner returns an Owner unique to one rule's run, as the operator makes
// "<install>-<entry>": the name prefix, so a shared backend shows whose the
// instances are, and random hex. Another rule's instances, and another
// run's on a shared backend, are then another owner's.
func newOwner(cfg Config) string {
	return cfg.NamePrefix + "-" + randomHex(4)
}

// otherOwner returns an Owner for the rule that is not the rule's own: a
// second install or provider entry sharing the backend. It starts with
// the rule's own Owner and is as long as an Owner may be (a DNS label of
// 63 characters, CreateRequest.Validate): a provider that matches owners
// by prefix lists it under the rule's own, and one that truncates an
// Owner reads another back.
func (e *env) otherOwner() string {
	return (e.owner + "-" + randomHex(32))[:maxOwnerLen]
}

// maxOwnerLen is the longest Owner CreateRequest.Validate accepts.
const maxOwnerLen = 63

// validOwner says whether owner passes CreateRequest.Validate; only such
// an Owner is listed at cleanup (a provider may refuse to list by a
// malformed one).
func validOwner(owner string) bool {
	return contract.CreateRequest{Name: "x", UID: "x", Owner: owner, Port: 1}.Validate() == nil
}

// newUID returns a random RFC 4122 version 4 UID, as Kubernetes makes.
func newUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
