package proxy

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/userdata"
)

// cloudInitError records why the Proxy's cloud-init could not be had, and
// retries after a poll. Nothing further happens in this reconcile: no VM
// is made, replaced or deleted without the cloud-init it is made from.
//
//   - Missing Secret or key: the spec points at nothing; CloudInitUnavailable.
//   - Forbidden: the operator's RBAC lacks the RoleBinding in the Proxy's
//     namespace; CloudInitForbidden names it. A serving Proxy stays Ready
//     (its VM answers) and says so on Provisioned.
//   - Anything else is the API server failing for now: a serving Proxy
//     stays Ready; the error goes to status.lastError and an event.
func (r *Reconciler) cloudInitError(ctx context.Context, proxy *v1alpha1.Proxy, err error) (ctrl.Result, error) {
	serving := meta.IsStatusConditionTrue(proxy.Status.Conditions, v1alpha1.ConditionReady)
	var read *userdata.ReadError
	switch {
	case errors.As(err, &read) && apierrors.IsForbidden(read.Err):
		msg := r.userdata.ForbiddenMessage(ctx, proxy, read.Secret)
		if c := meta.FindStatusCondition(proxy.Status.Conditions, v1alpha1.ConditionProvisioned); c == nil || c.Reason != v1alpha1.ReasonCloudInitForbidden {
			r.record(proxy, cloudInitForbidden(msg))
		}
		if serving {
			replica.SetCondition(proxy, v1alpha1.ConditionProvisioned, false, v1alpha1.ReasonCloudInitForbidden, msg)
		} else {
			replica.SetNotReady(proxy, v1alpha1.ReasonCloudInitForbidden, msg)
		}
	case errors.As(err, &read):
		proxy.Status.LastError = &v1alpha1.LastError{Class: string(contract.ClassTransient), Message: err.Error(), Time: metav1.Now()}
		r.record(proxy, cloudInitUnavailable(err))
		if !serving {
			replica.SetNotReady(proxy, v1alpha1.ReasonCloudInitUnavailable, err.Error())
		}
	default:
		replica.SetNotReady(proxy, v1alpha1.ReasonCloudInitUnavailable, err.Error())
	}
	return ctrl.Result{RequeueAfter: r.Timing.Poll}, r.writeStatus(ctx, proxy)
}
