package proxy

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// An instance is this Proxy's only when its UID mark is the Proxy's UID
// (instances.CarriesUID). The reconciler checks the mark before it
// records, serves or deletes an instance it did not find by that UID.

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
