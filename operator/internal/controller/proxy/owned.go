package proxy

import (
	"context"
	"errors"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// An instance is this Proxy's only when its UID mark is the Proxy's UID:
// instance names and providerIDs are the backend's keys, and backends reuse
// them (a VMID freed and taken again, a VM of another install named alike).
// The reconciler checks the mark before it records, serves or deletes an
// instance it did not find by that UID (docs/architecture.md, Principles).

// carriesUID reports whether inst carries proxy's UID.
func carriesUID(inst contract.Instance, uid string) bool { return inst.UID == uid }

// notOwned records that the backend answered, for the instance in role ro,
// with another Proxy's instance: a clear condition and an event, and a long
// wait, since only a person can sort it out. The instance is neither
// recorded in status, nor served, nor deleted.
func (r *Reconciler) notOwned(ctx context.Context, proxy *v1alpha1.Proxy, ro role, op string, inst contract.Instance) (ctrl.Result, error) {
	msg := fmt.Sprintf("%s returned instance %s (%s) carrying Proxy UID %q, not this Proxy's %q: it is not this Proxy's, so it is neither used nor deleted; "+
		"delete it or change the Proxy's spec to make a new instance", op, inst.Name, inst.ProviderID, inst.UID, proxy.UID)
	logf.FromContext(ctx).Info("instance is not this Proxy's; leaving it alone", "providerID", inst.ProviderID, "instanceUID", inst.UID, "proxyUID", proxy.UID)
	r.record(proxy, notOwned(op, msg))
	r.setProgress(proxy, ro, v1alpha1.ReasonInstanceNotOwned, msg)
	return ctrl.Result{RequeueAfter: r.Timing.PermanentRetry}, r.writeStatus(ctx, proxy)
}

// ownInstances keeps the instances of list that carry the Proxy's UID; a
// provider that returned another (its filter is not exact) is logged, and
// the instance left alone.
func ownInstances(ctx context.Context, proxy *v1alpha1.Proxy, list []contract.Instance) []contract.Instance {
	var own []contract.Instance
	for _, inst := range list {
		if carriesUID(inst, string(proxy.UID)) {
			own = append(own, inst)
			continue
		}
		logf.FromContext(ctx).Info("the provider listed an instance of another Proxy under this Proxy's UID; not deleting it",
			contract.LogKeyInstance, inst.Name, "providerID", inst.ProviderID, "instanceUID", inst.UID, "proxyUID", proxy.UID)
	}
	return own
}

// mayRetire reads the instance ref names back before retire deletes it by
// providerID: it may be gone already (done), or the providerID may now
// name another Proxy's instance (left alone, with an event).
func (r *Reconciler) mayRetire(ctx context.Context, proxy *v1alpha1.Proxy, entry *providers.Entry, ref *v1alpha1.InstanceRef, why string) bool {
	inst, err := entry.Provider.Get(ctx, ref.ProviderID)
	switch {
	case errors.Is(err, contract.ErrNotFound):
		logf.FromContext(ctx).Info("the retired instance is gone already", contract.LogKeyInstance, ref.Name, "providerID", ref.ProviderID, "why", why)
		return false
	case err != nil:
		r.record(proxy, deleteFailed("Delete",
			fmt.Sprintf("reading instance %s (%s) before deleting it: %v; the garbage collector will retry", ref.Name, why, err)))
		return false
	case !carriesUID(inst, string(proxy.UID)):
		r.record(proxy, notOwned("Delete",
			fmt.Sprintf("not deleting instance %s (%s, %s): it carries Proxy UID %q, not this Proxy's %q", ref.Name, ref.ProviderID, why, inst.UID, proxy.UID)))
		return false
	}
	return true
}
