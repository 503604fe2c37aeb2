package proxy

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// A Proxy whose provider entry is not in the providers config (it was
// removed, or never there) keeps its VMs: without the entry the operator
// cannot reach them, and no sweep of another entry collects them (their
// marks name the removed entry). Releasing such a Proxy would leak its VMs
// silently, so its deletion waits, saying why, until the entry is back or
// a person removes the finalizer knowingly (docs/operator.md, "Removing a
// provider entry").

// notConfiguredMessage says why a live Proxy on an unconfigured entry is
// not served, and that its VMs are kept.
func (r *Reconciler) notConfiguredMessage(proxy *v1alpha1.Proxy) string {
	return fmt.Sprintf("provider %q is not in the operator's providers config (configured: %v); its VMs, if any, are kept until the entry is configured again",
		proxy.Spec.Provider, r.Providers.Names())
}

// finalizeWithoutEntry holds a deleted Proxy whose entry is not configured:
// the finalizer stays, the status and an event say what the deletion waits
// for. Nothing is requeued: the config is read at start, so only a restart
// with the entry back (which reconciles every Proxy) or the finalizer's
// removal by hand can move it on.
func (r *Reconciler) finalizeWithoutEntry(ctx context.Context, proxy *v1alpha1.Proxy) (ctrl.Result, error) {
	msg := fmt.Sprintf("provider %q is not in the operator's providers config (configured: %v): the deletion waits, keeping its VMs, "+
		"until the entry is configured again and the operator restarted, or the finalizer %s is removed by hand, which leaves its VMs behind",
		proxy.Spec.Provider, r.Providers.Names(), v1alpha1.Finalizer)
	if c := meta.FindStatusCondition(proxy.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Message != msg {
		logf.FromContext(ctx).Info("provider is not configured; the deletion waits for it", "provider", proxy.Spec.Provider)
		r.record(proxy, providerNotConfigured("Delete", msg))
	}
	replica.SetNotReady(proxy, v1alpha1.ReasonProviderNotConfigured, msg)
	return ctrl.Result{}, r.writeStatus(ctx, proxy)
}
