package contracttest

import (
	"context"
	"fmt"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// exercise drives every method through success and, where the backend
// control allows, through failures, so the sentinel rules see every path
// that can log, trace or return an error.
func exercise(e *env, req contract.CreateRequest) {
	e.t.Helper()
	inst := e.mustCreate(req)
	_, _ = e.get(e.ctx(), e.p, inst.ProviderID)
	_, _ = e.list(e.ctx(), e.p, contract.LabelUID, req.UID)
	if checker, ok := e.p.(contract.Checker); ok {
		for _, r := range checker.Check(e.ctx()) {
			// Check results reach ProviderHealth status: they are output too.
			e.logs.logger().Info("check result", "target", r.Target, "message", r.Message, "details", fmt.Sprint(r.Details))
		}
	}
	if faults, ok := e.cfg.Backend.(FaultInjector); ok {
		for _, op := range []Op{OpCreate, OpGet, OpList, OpDelete} {
			for _, class := range []error{nil, contract.ErrPermanent} {
				if err := faults.FailNext(op, class); err != nil {
					e.t.Fatalf("backend control FailNext: %v", err)
				}
				switch op {
				case OpCreate:
					_, _ = e.create(e.ctx(), e.p, e.requestLike(req))
				case OpGet:
					_, _ = e.get(e.ctx(), e.p, inst.ProviderID)
				case OpList:
					_, _ = e.list(e.ctx(), e.p, contract.LabelManaged, e.owner)
				case OpDelete:
					_ = e.delete(e.ctx(), e.p, inst.ProviderID)
				}
			}
		}
		if err := faults.FailAfterCreate(); err == nil {
			_, _ = e.create(e.ctx(), e.p, e.requestLike(req))
		}
	}
	_, _ = e.create(e.ctx(), e.p, e.requestLike(req))
	if err := e.delete(e.ctx(), e.p, inst.ProviderID); err == nil {
		e.waitGone(e.p, inst.ProviderID)
	}
}

// requestLike returns a new request carrying req's CloudInit.
func (e *env) requestLike(req contract.CreateRequest) contract.CreateRequest {
	r := e.request()
	r.CloudInit = req.CloudInit
	return r
}

// sentinelCloudInit: CloudInit never appears, as it is or encoded, in a
// log line, span, error, instance message or anything the process writes
// (§1.6, §12), on the success paths or the failure paths.
func sentinelCloudInit(e *env) {
	stop := e.captureGlobals()
	sentinel := "sentinel-cloudinit-" + randomHex(8)
	req := e.request()
	req.CloudInit = []byte("#cloud-config\n# " + sentinel + "\nruncmd: [\"echo " + sentinel + "\"]\n")
	exercise(e, req)
	stop()
	e.assertAbsent("CloudInit", sentinel)
}

// sentinelCredential: the credential never appears in a log line, span or
// error (§7), including when the backend rejects it.
func sentinelCredential(e *env) {
	if e.cfg.Credential == "" {
		e.t.Skip("skipped: Config.Credential is not set")
	}
	stop := e.captureGlobals()
	exercise(e, e.request())
	if rejecter, ok := e.cfg.Backend.(CredentialRejecter); ok {
		inst := e.mustCreate(e.request())
		rejecter.RejectCredentials(true)
		p := e.cfg.NewProvider(e.t)
		req := e.request()
		if _, err := e.create(e.ctx(), p, req); err == nil {
			e.t.Errorf("Create succeeded with the credential rejected")
		}
		_, _ = e.get(e.ctx(), p, inst.ProviderID)
		_ = e.delete(e.ctx(), p, inst.ProviderID)
		_, _ = e.list(e.ctx(), p, contract.LabelManaged, e.owner)
		if checker, ok := p.(contract.Checker); ok {
			for _, r := range checker.Check(e.ctx()) {
				e.logs.logger().Info("check result", "target", r.Target, "message", r.Message, "details", fmt.Sprint(r.Details))
			}
		}
		rejecter.RejectCredentials(false)
	}
	stop()
	e.assertAbsent("credential", e.cfg.Credential)
}

// childSpans: the provider's backend calls appear as child spans under
// the operator's operation span (§12).
func childSpans(e *env) {
	if e.cfg.NoChildSpans != "" {
		e.t.Skip("skipped: the provider emits no child spans: " + e.cfg.NoChildSpans)
	}
	req := e.request()
	e.remember(req)
	var inst contract.Instance
	for _, op := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Create", func(ctx context.Context) (err error) { inst, err = e.p.Create(ctx, req); return err }},
		{"Get", func(ctx context.Context) (err error) { _, err = e.p.Get(ctx, inst.ProviderID); return err }},
		{"ListByTag", func(ctx context.Context) (err error) {
			_, err = e.p.ListByTag(ctx, contract.LabelUID, req.UID)
			return err
		}},
		{"Delete", func(ctx context.Context) error { return e.p.Delete(ctx, inst.ProviderID) }},
	} {
		parent, err := e.op(e.ctx(), op.name, op.call)
		if err != nil {
			e.t.Fatalf("%s: %v", op.name, err)
		}
		if op.name == "Create" {
			e.track(inst.ProviderID)
		}
		children := 0
		for _, s := range e.spans.rec.Ended() {
			if s.Parent().SpanID() == parent.SpanID() && s.SpanContext().TraceID() == parent.TraceID() {
				children++
			}
		}
		if children == 0 {
			e.t.Errorf("%s made no child span under the operation span", op.name)
		}
	}
}

// logLinesNameTheInstance: every line the provider logs while working on
// one instance carries the provider key the operator set and the instance
// key: the instance's name in Create, the providerID Get and Delete were
// given (§12), so one search finds every line of one call. And it logs
// with the logger in ctx only: a line on stderr, the standard library's
// log or slog default, or OpenTelemetry's error handler reaches no
// operator's log pipeline with its keys (a provider that logs only there
// would otherwise pass as one that logs nothing).
func logLinesNameTheInstance(e *env) {
	req := e.request()
	start := len(e.logs.snapshot())
	stop := e.captureGlobals()
	inst := e.mustCreate(req)
	created := len(e.logs.snapshot())
	_, _ = e.get(e.ctx(), e.p, inst.ProviderID)
	err := e.delete(e.ctx(), e.p, inst.ProviderID)
	stop()
	if err != nil {
		e.t.Fatalf("Delete: %v", err)
	}
	if out := e.globals.text(); out != "" {
		e.t.Errorf("the provider wrote outside the logger in ctx (stderr, log, slog's default or OpenTelemetry's error handler) during Create, Get and Delete:\n%s", out)
	}
	lines := e.logs.since(start)
	if len(lines) == 0 {
		e.t.Skip("skipped: the provider logged nothing (logging: none)")
	}
	for i, l := range lines {
		provider, instance := l[contract.LogKeyProvider], l[contract.LogKeyInstance]
		call, want := "Create", req.Name
		if start+i >= created {
			call, want = "Get or Delete", inst.ProviderID
		}
		switch {
		case provider != "contracttest":
			e.t.Errorf("log line whose %q key is %v, not the operator's %q: %v", contract.LogKeyProvider, provider, "contracttest", l)
		case instance != want:
			e.t.Errorf("log line of %s about %s whose %q key is %v, want %q: %v", call, req.Name, contract.LogKeyInstance, instance, want, l)
		}
	}
}
