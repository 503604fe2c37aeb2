package proxy

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// reportConflict keeps the Proxy not Ready while an object it needs is
// someone else's, and looks again at each resync: the object is not in
// the cache, so its removal sends no event. The event is sent when the
// conflict is new, not at every look.
func (r *Reconciler) reportConflict(ctx context.Context, proxy *v1alpha1.Proxy, conflict error) (ctrl.Result, error) {
	msg := conflict.Error()
	if c := meta.FindStatusCondition(proxy.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonServiceConflict || c.Message != msg {
		r.record(proxy, serviceConflict(msg))
	}
	replica.SetNotReady(proxy, v1alpha1.ReasonServiceConflict, msg)
	return ctrl.Result{RequeueAfter: r.Timing.Resync}, r.writeStatus(ctx, proxy)
}
