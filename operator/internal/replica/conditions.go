package replica

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// A Proxy's conditions and phase, derived from its replicas (docs/operator.md).
// A one-replica Proxy keeps its readiness in the Ready condition; with
// more, each replica's is in its entry of status.replicas, and Ready (at
// least one answers) and Degraded (not all do) are derived from them
// (Aggregate, Summarise).

// Phase summarises a Proxy in one word.
func Phase(proxy *v1alpha1.Proxy) v1alpha1.ProxyPhase {
	s := &proxy.Status
	ready := meta.IsStatusConditionTrue(s.Conditions, v1alpha1.ConditionReady)
	switch {
	case !proxy.DeletionTimestamp.IsZero():
		return v1alpha1.PhaseDeleting
	case s.Replacement != nil && ConditionReason(s.Conditions, v1alpha1.ConditionReady) == v1alpha1.ReasonReplacing:
		// Break-before-make: the old VM is being deleted.
		return v1alpha1.PhaseReplacing
	case ready && (s.Replacement != nil || AnyReplacement(proxy)):
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

// SetCondition sets the Proxy's condition of type typ, True when ok, at
// its generation.
func SetCondition(proxy *v1alpha1.Proxy, typ string, ok bool, reason, msg string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&proxy.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: proxy.Generation,
	})
}

// SetNotReady marks the Proxy not ready and not provisioned for reason.
func SetNotReady(proxy *v1alpha1.Proxy, reason, msg string) {
	SetCondition(proxy, v1alpha1.ConditionReady, false, reason, msg)
	SetCondition(proxy, v1alpha1.ConditionProvisioned, false, reason, msg)
}

// ServingWhileReplacing reports whether a Ready instance serves while a
// replacement is on its way.
func ServingWhileReplacing(proxy *v1alpha1.Proxy) bool {
	return proxy.Status.Replacement != nil && meta.IsStatusConditionTrue(proxy.Status.Conditions, v1alpha1.ConditionReady)
}

// SetNotReadyUnlessServing records a failure of the instance being worked
// on; while a replacement fails, the serving instance stays Ready.
func SetNotReadyUnlessServing(proxy *v1alpha1.Proxy, reason, msg string) {
	if ServingWhileReplacing(proxy) {
		SetCondition(proxy, v1alpha1.ConditionProvisioned, false, reason, "replacement: "+msg)
		return
	}
	SetNotReady(proxy, reason, msg)
}

// MarkReady records that the serving instance answers.
func MarkReady(proxy *v1alpha1.Proxy) {
	s := &proxy.Status
	s.Address = s.Instance.IP
	s.Endpoint = fmt.Sprintf("http://%s.%s.svc:%d", proxy.Name, proxy.Namespace, proxy.Spec.Port)
	s.LastError = nil
	SetCondition(proxy, v1alpha1.ConditionProvisioned, true, v1alpha1.ReasonReady, fmt.Sprintf("instance %s runs at %s", s.Instance.Name, s.Instance.IP))
	SetCondition(proxy, v1alpha1.ConditionReady, true, v1alpha1.ReasonReady, fmt.Sprintf("the proxy answers at %s:%d", s.Instance.IP, proxy.Spec.Port))
}

// ConditionReason is the reason of the condition of type typ, "" if unset.
func ConditionReason(conds []metav1.Condition, typ string) string {
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return c.Reason
	}
	return ""
}

// AnyReplacement reports whether a replica beyond the first is being
// replaced.
func AnyReplacement(proxy *v1alpha1.Proxy) bool {
	for _, sl := range proxy.Status.Replicas {
		if sl.Index > 0 && sl.Replacement != nil {
			return true
		}
	}
	return false
}

// SetReplica records replica k's state and derives the Proxy's
// conditions from all of them.
func SetReplica(proxy *v1alpha1.Proxy, k int, ready bool, address, reason, msg string) {
	sl := Slot(proxy, k)
	sl.Ready, sl.Reason, sl.Message = ready, reason, msg
	sl.Address = address
	Aggregate(proxy)
}

// Aggregate sets Ready (at least one replica answers) and Provisioned
// from the replicas' entries, for a Proxy of more than one replica.
func Aggregate(proxy *v1alpha1.Proxy) {
	n := Desired(proxy)
	var ready []string
	var first *v1alpha1.ReplicaStatus
	for k := range n {
		sl := Slot(proxy, k)
		if sl.Ready {
			ready = append(ready, fmt.Sprintf("%d (%s)", k, sl.Address))
		} else if first == nil {
			first = sl
		}
	}
	if len(ready) == 0 {
		reason, msg := v1alpha1.ReasonProvisioning, "no replica answers yet"
		if first != nil && first.Reason != "" {
			reason, msg = first.Reason, fmt.Sprintf("no replica answers; replica %d: %s", first.Index, first.Message)
		}
		SetNotReady(proxy, reason, msg)
		return
	}
	msg := fmt.Sprintf("%d of %d replicas answer on port %d: %s", len(ready), n, proxy.Spec.Port, strings.Join(ready, ", "))
	SetCondition(proxy, v1alpha1.ConditionProvisioned, true, v1alpha1.ReasonReady, msg)
	SetCondition(proxy, v1alpha1.ConditionReady, true, v1alpha1.ReasonReady, msg)
}

// Summarise fills what status shows of every Proxy's replicas before a
// write: replica 0's entry mirrors status.instance (and, for one replica,
// the Ready condition), each replica's egress address and the list of
// them, the ready/desired count, and Degraded naming the replicas that do
// not answer.
func Summarise(proxy *v1alpha1.Proxy) {
	s := &proxy.Status
	n := Desired(proxy)
	zero := Slot(proxy, 0)
	zero.Instance, zero.Replacement = s.Instance.DeepCopy(), s.Replacement.DeepCopy()
	if !Multi(proxy) {
		zero.Ready = meta.IsStatusConditionTrue(s.Conditions, v1alpha1.ConditionReady)
		zero.Reason, zero.Message = ConditionReason(s.Conditions, v1alpha1.ConditionReady), ""
		if c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady); c != nil {
			zero.Message = c.Message
		}
		zero.Address = ""
		if zero.Ready {
			zero.Address = s.Address
		}
	}
	var egress []string
	for i := range s.Replicas {
		s.Replicas[i].EgressAddress = egressAddress(&s.Replicas[i])
	}
	for k := range n {
		if a := Slot(proxy, k).EgressAddress; a != "" {
			egress = append(egress, a)
		}
	}
	s.EgressAddresses = egress
	var missing []string
	ready := 0
	for k := range n {
		sl := Slot(proxy, k)
		if sl.Ready {
			ready++
			continue
		}
		why := sl.Reason
		if why == "" {
			why = "not made yet"
		}
		missing = append(missing, fmt.Sprintf("replica %d (%s)", k, why))
	}
	s.ReadyReplicas = int32(ready)
	s.Ready = fmt.Sprintf("%d/%d", ready, n)
	if len(missing) > 0 {
		SetCondition(proxy, v1alpha1.ConditionDegraded, true, v1alpha1.ReasonReplicasNotReady,
			fmt.Sprintf("%d of %d replicas answer; not answering: %s", ready, n, strings.Join(missing, ", ")))
	} else {
		SetCondition(proxy, v1alpha1.ConditionDegraded, false, v1alpha1.ReasonAllReplicasReady, fmt.Sprintf("all %d replicas answer", n))
	}
}

// egressAddress is the replica's egress address: its serving VM's, or its
// replacement's, which holds it once made (a replica with a kept egress
// address is replaced break-before-make: its replacement is then its only
// VM); "" when the provider keeps none.
func egressAddress(sl *v1alpha1.ReplicaStatus) string {
	for _, ref := range []*v1alpha1.InstanceRef{sl.Instance, sl.Replacement} {
		if ref != nil && ref.EgressIP != "" {
			return ref.EgressIP
		}
	}
	return ""
}
