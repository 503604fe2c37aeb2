package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// writeStatus derives the phase from the conditions and writes the status,
// unless the cache already holds exactly that status: a Ready Proxy's
// resync, or a proxy still booting and probed every second, then costs the
// API server nothing.
func (r *ProxyReconciler) writeStatus(ctx context.Context, proxy *v1alpha1.Proxy) error {
	proxy.Status.ObservedGeneration = proxy.Generation
	replica.Summarise(proxy)
	proxy.Status.Phase = replica.Phase(proxy)
	var cached v1alpha1.Proxy
	if err := r.Get(ctx, client.ObjectKeyFromObject(proxy), &cached); err == nil &&
		cached.UID == proxy.UID && equality.Semantic.DeepEqual(cached.Status, proxy.Status) {
		return nil
	}
	return r.Status().Update(ctx, proxy)
}

// setProgress records that the instance in role ro is on its way. While the
// old instance serves, setNotReadyUnlessServing names the replacement.
func (r *ProxyReconciler) setProgress(proxy *v1alpha1.Proxy, ro role, reason, msg string) {
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
