// Package credentials watches the mounted credential files and acts when
// they change (docs/architecture.md, "The operator's packages").
package credentials

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// DefaultPoll is how often the Watcher looks at the
// credentials directory.
const DefaultPoll = 2 * time.Second

// Watcher acts when the mounted credential files change — a
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
type Watcher struct {
	// Dir is where the credentials Secret is mounted
	// (/etc/egress-proxies/credentials).
	Dir string
	// Poll is the time between two looks; DefaultPoll if zero.
	Poll time.Duration
	// Client lists the Proxies to reconcile again.
	Client client.Reader
	// Requeue takes one event per Proxy to reconcile; the Proxy reconciler's
	// Requeue reads it.
	Requeue chan<- event.GenericEvent
	// Health runs every provider's checks again (health.Checker); nil
	// skips them.
	Health interface{ CheckAll(context.Context) }
	// ResetBackoffs forgets the Proxies' back-offs after transient
	// failures, so that the reconciles Requeue starts call the provider at
	// once (proxy.Reconciler.CredentialsChanged); nil leaves them.
	ResetBackoffs func()
}

// NeedLeaderElection keeps the watcher with the controller and the health
// checker it drives, on the leader.
func (w *Watcher) NeedLeaderElection() bool { return true }

// Start looks at Dir every Poll until ctx ends, and acts on each change
// once it has settled (one Poll later).
// The state at start is the baseline: every Proxy reconciles at start
// anyway.
func (w *Watcher) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithValues("dir", w.Dir)
	ctx = logf.IntoContext(ctx, log)
	poll := w.Poll
	if poll == 0 {
		poll = DefaultPoll
	}
	// acted is the state last acted on; seen, the state of the last look.
	// A change is acted on once two looks in a row agree on it: a look is
	// a walk, not a snapshot, and one that races the kubelet's swap and
	// removal of the old payload sees a link that resolves nowhere — a
	// state that lasts one look and would otherwise be a second change.
	acted := dirState(w.Dir)
	seen := acted
	log.Info("watching the credential files")
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		now := dirState(w.Dir)
		if now == seen && now != acted {
			acted = now
			w.changed(ctx)
		}
		seen = now
	}
}

// changed forgets the Proxies' back-offs, reconciles every Proxy that is
// not Ready (or is being deleted: its finalizer may wait on the same
// credential) and runs every provider's checks. Ready Proxies are left
// alone: their provider reads the new files on its next call.
func (w *Watcher) changed(ctx context.Context) {
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
		w.Health.CheckAll(ctx)
	}
}
