package proxy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// No rule on Secrets here: the generated ClusterRole reads none. Asking
// the API server who the operator is needs no grant beyond the default
// system:basic-user, but is stated so the role says all the operator does.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=selfsubjectreviews,verbs=create

// CloudInitReaderRole is the ClusterRole the install ships for reading
// cloud-init Secrets (config/rbac/cloudinit_reader_role.yaml, named with
// the install's prefix). It is bound to nothing: the operator reads
// Secrets only in the namespaces where an admin binds it with a RoleBinding.
const CloudInitReaderRole = "egress-proxies-cloudinit-reader"

// secretReadError is a failed read of the cloud-init Secret, other than
// its absence: the API server refused (Forbidden) or failed to answer.
type secretReadError struct {
	name string
	err  error
}

func (e *secretReadError) Error() string {
	return fmt.Sprintf("spec.cloudInit: reading Secret %q: %v", e.name, e.err)
}

func (e *secretReadError) Unwrap() error { return e.err }

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
	var read *secretReadError
	switch {
	case errors.As(err, &read) && apierrors.IsForbidden(read.err):
		msg := r.forbiddenMessage(ctx, proxy, read.name)
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

// forbiddenMessage names the RoleBinding that lets the operator read the
// Proxy's cloud-init Secret, as a command to run.
func (r *Reconciler) forbiddenMessage(ctx context.Context, proxy *v1alpha1.Proxy, secret string) string {
	subject := "--serviceaccount=<the operator's namespace>:<its ServiceAccount>"
	if name := r.self.get(ctx, r); name != "" {
		if sa, ok := strings.CutPrefix(name, "system:serviceaccount:"); ok {
			subject = "--serviceaccount=" + sa
		} else {
			subject = "--user=" + name
		}
	}
	return fmt.Sprintf("spec.cloudInit: the operator may not read Secret %q in namespace %q; "+
		"bind the ClusterRole %s to the operator with a RoleBinding in that namespace: "+
		"kubectl -n %s create rolebinding %s --clusterrole=%s %s",
		secret, proxy.Namespace, CloudInitReaderRole, proxy.Namespace, CloudInitReaderRole, CloudInitReaderRole, subject)
}

// selfName asks the API server once who the operator is (a
// SelfSubjectReview, which every authenticated user may create) and keeps
// the answer; a failed question is asked again next time.
type selfName struct {
	mu   sync.Mutex
	name string
}

func (s *selfName) get(ctx context.Context, r *Reconciler) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.name == "" {
		review := &authenticationv1.SelfSubjectReview{}
		if err := r.Create(ctx, review); err == nil {
			s.name = review.Status.UserInfo.Username
		}
	}
	return s.name
}
