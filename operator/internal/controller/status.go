package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	r.summarise(proxy)
	proxy.Status.Phase = phaseOf(proxy)
	var cached v1alpha1.Proxy
	if err := r.Get(ctx, client.ObjectKeyFromObject(proxy), &cached); err == nil &&
		cached.UID == proxy.UID && equality.Semantic.DeepEqual(cached.Status, proxy.Status) {
		return nil
	}
	return r.Status().Update(ctx, proxy)
}

// phaseOf summarises a Proxy in one word.
func phaseOf(proxy *v1alpha1.Proxy) v1alpha1.ProxyPhase {
	s := &proxy.Status
	ready := meta.IsStatusConditionTrue(s.Conditions, v1alpha1.ConditionReady)
	switch {
	case !proxy.DeletionTimestamp.IsZero():
		return v1alpha1.PhaseDeleting
	case s.Replacement != nil && conditionReason(s.Conditions, v1alpha1.ConditionReady) == v1alpha1.ReasonReplacing:
		// Break-before-make: the old VM is being deleted.
		return v1alpha1.PhaseReplacing
	case ready && (s.Replacement != nil || anyReplacement(proxy)):
		return v1alpha1.PhaseReplacing
	case ready:
		return v1alpha1.PhaseReady
	case s.LastError != nil && s.LastError.Class == "Permanent",
		meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady) != nil &&
			meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady).Reason == v1alpha1.ReasonProviderNotConfigured:
		return v1alpha1.PhaseFailed
	case s.Instance != nil && s.Instance.ProviderID != "":
		return v1alpha1.PhaseProvisioning
	default:
		return v1alpha1.PhasePending
	}
}

func (r *ProxyReconciler) setCondition(proxy *v1alpha1.Proxy, typ string, ok bool, reason, msg string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&proxy.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: proxy.Generation,
	})
}

// setNotReady marks the Proxy not ready and not provisioned for reason.
func (r *ProxyReconciler) setNotReady(proxy *v1alpha1.Proxy, reason, msg string) {
	r.setCondition(proxy, v1alpha1.ConditionReady, false, reason, msg)
	r.setCondition(proxy, v1alpha1.ConditionProvisioned, false, reason, msg)
}

// servingWhileReplacing reports whether a Ready instance serves while a
// replacement is on its way.
func servingWhileReplacing(proxy *v1alpha1.Proxy) bool {
	return proxy.Status.Replacement != nil && meta.IsStatusConditionTrue(proxy.Status.Conditions, v1alpha1.ConditionReady)
}

// setNotReadyUnlessServing records a failure of the instance being worked
// on; while a replacement fails, the serving instance stays Ready.
func (r *ProxyReconciler) setNotReadyUnlessServing(proxy *v1alpha1.Proxy, reason, msg string) {
	if servingWhileReplacing(proxy) {
		r.setCondition(proxy, v1alpha1.ConditionProvisioned, false, reason, "replacement: "+msg)
		return
	}
	r.setNotReady(proxy, reason, msg)
}

// setProgress records that the instance in role ro is on its way. While the
// old instance serves, setNotReadyUnlessServing names the replacement.
func (r *ProxyReconciler) setProgress(proxy *v1alpha1.Proxy, ro role, reason, msg string) {
	if replica.Multi(proxy) {
		// Only this replica's state: the others may answer.
		sl := replica.Slot(proxy, ro.index)
		if ro.repl && sl.Ready {
			r.setReplica(proxy, ro.index, true, sl.Address, sl.Reason, "replacement: "+msg)
			return
		}
		if ro.repl {
			msg = "replacement: " + msg
		}
		r.setReplica(proxy, ro.index, false, "", reason, msg)
		return
	}
	if ro.repl && !servingWhileReplacing(proxy) {
		msg = "replacement: " + msg
	}
	r.setNotReadyUnlessServing(proxy, reason, msg)
}

// markReady records that the serving instance answers.
func (r *ProxyReconciler) markReady(proxy *v1alpha1.Proxy) {
	s := &proxy.Status
	s.Address = s.Instance.IP
	s.Endpoint = fmt.Sprintf("http://%s.%s.svc:%d", proxy.Name, proxy.Namespace, proxy.Spec.Port)
	s.LastError = nil
	r.setCondition(proxy, v1alpha1.ConditionProvisioned, true, v1alpha1.ReasonReady, fmt.Sprintf("instance %s runs at %s", s.Instance.Name, s.Instance.IP))
	r.setCondition(proxy, v1alpha1.ConditionReady, true, v1alpha1.ReasonReady, fmt.Sprintf("the proxy answers at %s:%d", s.Instance.IP, proxy.Spec.Port))
}

// conditionReason is the reason of the condition of type typ, "" if unset.
func conditionReason(conds []metav1.Condition, typ string) string {
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return c.Reason
	}
	return ""
}

// anyReplacement reports whether a replica beyond the first is being
// replaced.
func anyReplacement(proxy *v1alpha1.Proxy) bool {
	for _, sl := range proxy.Status.Replicas {
		if sl.Index > 0 && sl.Replacement != nil {
			return true
		}
	}
	return false
}
