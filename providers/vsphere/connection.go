package vsphere

// The SOAP session every call shares: made on first use and again after it
// expires or the credential files change, one login at a time, and the
// step runner that retries once on an expired session.

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/go-logr/logr"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// session returns the logged-in client, logging in when there is none or
// the credential files changed. One login runs at a time, and every call
// that needs it waits for it only as long as its own ctx allows (contract
// §1.5): a slow vCenter login stalls no call past its deadline. The login
// itself runs to its end, bounded by callTimeout, for the calls still
// waiting and the ones to come.
func (p *Provider) session(ctx context.Context) (*vim25.Client, error) {
	p.mu.Lock()
	if p.client != nil && !p.user.Changed() && !p.pass.Changed() {
		c := p.client
		p.mu.Unlock()
		return c, nil
	}
	call := p.login
	if call == nil {
		call = &loginCall{done: make(chan struct{})}
		p.login = call
		go p.runLogin(context.WithoutCancel(ctx), call)
	}
	p.mu.Unlock()
	select {
	case <-call.done:
		return call.client, call.err
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the login to vCenter: %w", ctx.Err())
	}
}

// loginCall is a login in flight; done is closed once client or err is set.
type loginCall struct {
	done   chan struct{}
	client *vim25.Client
	err    error
}

// runLogin logs in for call and, when it succeeds, makes its client the
// session's, with an empty cache, and logs out the session it replaced.
func (p *Provider) runLogin(ctx context.Context, call *loginCall) {
	c, err := p.logIn(ctx)
	p.mu.Lock()
	var replaced *vim25.Client
	if err == nil {
		replaced = p.client
		p.client, p.refs = c, map[string]object.Reference{}
	}
	p.login = nil
	p.mu.Unlock()
	call.client, call.err = c, err
	close(call.done)
	if replaced != nil {
		p.logOut(ctx, replaced)
	}
}

// logOut ends a session the provider replaced because the credential
// files changed. vCenter keeps a session until it idles out (30 minutes
// by default) and limits how many it holds, so each rotation would
// otherwise leave one behind. A call still running on it fails
// NotAuthenticated and runs again on the new session (do). An expired
// session is never replaced here: do drops it first.
func (p *Provider) logOut(ctx context.Context, c *vim25.Client) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout.Duration)
	defer cancel()
	log := logr.FromContextOrDiscard(ctx)
	if err := session.NewManager(c).Logout(ctx); err != nil {
		log.V(contract.LogStep).Info("could not log out the replaced session; it idles out on vCenter", "error", classify(err).Error())
		return
	}
	log.V(contract.LogStep).Info("logged out the replaced session")
}

// logIn connects to the server and logs in with the credential files.
func (p *Provider) logIn(ctx context.Context) (*vim25.Client, error) {
	user, err := p.user.Read()
	if err != nil {
		return nil, err
	}
	pass, err := p.pass.Read()
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(p.cfg.Server)
	if err != nil {
		return nil, contract.Permanentf("server: %w", err)
	}
	sc := soap.NewClient(u, p.cfg.InsecureSkipTLSVerify)
	sc.DefaultTransport().MaxIdleConnsPerHost = idleConnections
	if p.cfg.CAFile != "" {
		if err := sc.SetRootCAs(p.cfg.CAFile); err != nil {
			return nil, contract.Permanentf("caFile %s: %w", p.cfg.CAFile, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout.Duration)
	defer cancel()
	c, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return nil, classify(fmt.Errorf("connect to %s: %w", u.Host, err))
	}
	if err := session.NewManager(c).Login(ctx, url.UserPassword(user, pass)); err != nil {
		return nil, classify(fmt.Errorf("log in to %s: %w", u.Host, err))
	}
	logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("logged in", "server", u.Host)
	return c, nil
}

// idleConnections is how many connections to vCenter stay open between
// calls. govmomi's transport keeps net/http's default of two, so with more
// calls at once than that (the operator's limits.concurrency) every answer
// beyond the second closed its connection and the next call opened a new
// one, a TLS handshake each (hack/bench-fleet.sh). Idle ones
// still close after the transport's IdleConnTimeout (90 s).
const idleConnections = 32

// do runs one step against vSphere: with the session, bounded by the call
// (or task) timeout, under a child span, logged at the call tier, its
// error classified. A session that expired is dropped, and the step runs
// once more with a fresh one.
func (p *Provider) do(ctx context.Context, name string, budget time.Duration, fn func(context.Context, *vim25.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	ctx, span := contract.StartSpan(ctx, "vsphere."+name)
	start := time.Now()
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		var c *vim25.Client
		if c, err = p.session(ctx); err != nil {
			break
		}
		err = fn(ctx, c)
		// Before classify: fault.As does not see through the class's
		// wrapper, so forgetMissing never matched a classified fault.
		dropped := p.forgetMissing(c, err)
		err = classify(err)
		if dropped {
			// A cached location is gone (a folder removed, or removed
			// and made again): look it up afresh, once. Read as it
			// came, the fault would say the instance is gone.
			continue
		}
		if !isNotAuthenticated(err) {
			break
		}
		p.dropSession(c)
	}
	contract.EndSpan(span, err)
	logr.FromContextOrDiscard(ctx).V(contract.LogCall).Info("vsphere call", "call", name, "duration", time.Since(start), "class", contract.ClassOf(err))
	if err != nil {
		return fmt.Errorf("vsphere %s: %w", name, err)
	}
	return nil
}

func (p *Provider) dropSession(c *vim25.Client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client == c {
		p.client = nil
	}
}
