package proxy

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// statusBase is the Proxy as the API server last showed it to this
// reconcile — read, or written back — and the base of the reconcile's next
// status write: a merge patch of what changed since, conditional on that
// resourceVersion, so a Proxy changed meanwhile conflicts and is
// reconciled again, as an update would.
type statusBase struct{ last *v1alpha1.Proxy }

type statusBaseKey struct{}

// withStatusBase starts a reconcile's status writes from proxy as read.
func withStatusBase(ctx context.Context, proxy *v1alpha1.Proxy) context.Context {
	return context.WithValue(ctx, statusBaseKey{}, &statusBase{last: proxy.DeepCopy()})
}

// rebase records that the reconcile wrote proxy back (its finalizer).
func rebase(ctx context.Context, proxy *v1alpha1.Proxy) {
	if b, ok := ctx.Value(statusBaseKey{}).(*statusBase); ok {
		b.last = proxy.DeepCopy()
	}
}

// writeStatus derives the phase from the conditions and patches the
// status, unless the API server holds exactly that status already: a
// Ready Proxy's resync, or a proxy still booting and probed every second,
// then costs the API server nothing.
func (r *Reconciler) writeStatus(ctx context.Context, proxy *v1alpha1.Proxy) error {
	proxy.Status.ObservedGeneration = proxy.Generation
	replica.Summarise(proxy)
	proxy.Status.Phase = replica.Phase(proxy)
	b, ok := ctx.Value(statusBaseKey{}).(*statusBase)
	if !ok || b.last.UID != proxy.UID {
		return fmt.Errorf("writing the status of Proxy %s/%s outside its reconcile", proxy.Namespace, proxy.Name)
	}
	if equality.Semantic.DeepEqual(b.last.Status, proxy.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, proxy, client.MergeFromWithOptions(b.last, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	b.last = proxy.DeepCopy()
	return nil
}

// setProgress records that the instance in role ro is on its way. While the
// old instance serves, setNotReadyUnlessServing names the replacement.
func (r *Reconciler) setProgress(proxy *v1alpha1.Proxy, ro role, reason, msg string) {
	if replica.Multi(proxy) {
		// Only this replica's state: the others may answer.
		sl := replica.Slot(proxy, ro.index)
		if ro.repl && sl.Ready {
			replica.SetReplica(proxy, ro.index, true, sl.Address, sl.Reason, "replacement: "+msg)
			return
		}
		if ro.repl {
			msg = "replacement: " + msg
		}
		replica.SetReplica(proxy, ro.index, false, "", reason, msg)
		return
	}
	if ro.repl && !replica.ServingWhileReplacing(proxy) {
		msg = "replacement: " + msg
	}
	replica.SetNotReadyUnlessServing(proxy, reason, msg)
}
