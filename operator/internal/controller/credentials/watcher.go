package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// DefaultCredentialsPoll is how often the CredentialsWatcher looks at the
// credentials directory.
const DefaultCredentialsPoll = 2 * time.Second

// CredentialsWatcher acts when the mounted credential files change — a
// Secret created after the Proxies that need it, a rotated password —
// rather than leaving each waiting Proxy to its back-off (up to 30 min
// after a credential the backend refused): it reconciles again every
// Proxy that is not Ready, and runs every provider's checks, so its
// ProviderHealth clears too.
//
// It polls the directory (a stat of its few entries every Poll) rather
// than watching it with inotify: a poll sees the kubelet's `..data` swap as
// surely, needs no handling of a directory that does not exist yet or is
// replaced, and costs nothing next to the kubelet's own delay, which writes
// a changed Secret up to a minute or so after the change.
//
// Files a provider reads outside Dir are still read again on the
// provider's next call; only this shortcut misses them.
type CredentialsWatcher struct {
	// Dir is where the credentials Secret is mounted
	// (/etc/egress-proxies/credentials).
	Dir string
	// Poll is the time between two looks; DefaultCredentialsPoll if zero.
	Poll time.Duration
	// Client lists the Proxies to reconcile again.
	Client client.Reader
	// Requeue takes one event per Proxy to reconcile; the ProxyReconciler's
	// Requeue reads it.
	Requeue chan<- event.GenericEvent
	// Health runs every provider's checks again; nil skips them.
	Health *HealthChecker
	// ResetBackoffs forgets the Proxies' back-offs after transient
	// failures, so that the reconciles Requeue starts call the provider at
	// once (ProxyReconciler.CredentialsChanged); nil leaves them.
	ResetBackoffs func()
}

// NeedLeaderElection keeps the watcher with the controller and the health
// checker it drives, on the leader.
func (w *CredentialsWatcher) NeedLeaderElection() bool { return true }

// Start looks at Dir every Poll until ctx ends, and acts on each change.
// The state at start is the baseline: every Proxy reconciles at start
// anyway.
func (w *CredentialsWatcher) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithValues("dir", w.Dir)
	ctx = logf.IntoContext(ctx, log)
	poll := w.Poll
	if poll == 0 {
		poll = DefaultCredentialsPoll
	}
	last := dirState(w.Dir)
	log.Info("watching the credential files")
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if now := dirState(w.Dir); now != last {
			last = now
			w.changed(ctx)
		}
	}
}

// changed forgets the Proxies' back-offs, reconciles every Proxy that is
// not Ready (or is being deleted: its finalizer may wait on the same
// credential) and runs every provider's checks. Ready Proxies are left
// alone: their provider reads the new files on its next call.
func (w *CredentialsWatcher) changed(ctx context.Context) {
	log := logf.FromContext(ctx)
	if w.ResetBackoffs != nil {
		w.ResetBackoffs()
	}
	var list v1alpha1.ProxyList
	if err := w.Client.List(ctx, &list); err != nil {
		log.Error(err, "credential files changed, but listing the Proxies failed; they retry on their own back-off")
	}
	n := 0
	for i := range list.Items {
		p := &list.Items[i]
		if meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady) && p.DeletionTimestamp.IsZero() {
			continue
		}
		select {
		case w.Requeue <- event.GenericEvent{Object: p}:
			n++
		case <-ctx.Done():
			return
		}
	}
	log.Info("credential files changed: reconciling the Proxies that are not Ready and checking the providers", "proxies", n)
	if w.Health != nil {
		w.Health.checkAll(ctx)
	}
}

// checkAll runs one check round of every provider now, side by side, and
// waits for them.
func (h *HealthChecker) checkAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, e := range h.Providers.All() {
		wg.Go(func() {
			if err := h.Check(ctx, e); err != nil && ctx.Err() == nil {
				logf.FromContext(ctx).Error(err, "writing ProviderHealth", contract.LogKeyProvider, e.Name)
			}
		})
	}
	wg.Wait()
}

// CredentialsChanged forgets every Proxy's back-off after transient
// failures and wakes the operations waiting one out: the
// CredentialsWatcher calls it when the credential files change, before it
// reconciles the Proxies that are not Ready.
func (r *ProxyReconciler) CredentialsChanged() {
	if r.ops != nil {
		r.ops.ResetBackoffs()
	}
}

// requeueSource is where the controller hears the watcher's events. A
// reconciler without a watcher gets a channel nothing writes to.
func (r *ProxyReconciler) requeueSource() source.Source {
	ch := r.Requeue
	if ch == nil {
		ch = make(chan event.GenericEvent)
	}
	return source.Channel(ch, &handler.EnqueueRequestForObject{})
}

// credentialsReason is the condition reason for a provider error: a
// credential file that cannot be used gets a reason of its own, found by
// type whatever the provider wrapped around it, so the Proxy says what to
// fix rather than BackendUnavailable or ProviderError.
func credentialsReason(err error, reason string) string {
	if errors.As(err, new(*contract.CredentialError)) {
		return v1alpha1.ReasonCredentialsUnavailable
	}
	return reason
}
