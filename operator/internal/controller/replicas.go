package controller

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// Replicas (spec.replicas, docs/operator.md). Replica 0's VMs stay in
// status.instance and status.replacement, where releases before replicas
// kept them: an upgraded operator finds a one-replica Proxy's VM where it
// was, under the same name and spec hash, and replaces nothing. Every
// other replica's VMs are in its entry of status.replicas. A one-replica
// Proxy keeps its readiness in the Ready condition as before; with more,
// each replica's is in its entry, and Ready (at least one answers) and
// Degraded (not all do) are derived from them (aggregate).

// setReplica records replica k's state and derives the Proxy's
// conditions from all of them.
func (r *ProxyReconciler) setReplica(proxy *v1alpha1.Proxy, k int, ready bool, address, reason, msg string) {
	sl := replica.Slot(proxy, k)
	sl.Ready, sl.Reason, sl.Message = ready, reason, msg
	sl.Address = address
	r.aggregate(proxy)
}

// aggregate sets Ready (at least one replica answers) and Provisioned
// from the replicas' entries, for a Proxy of more than one replica.
func (r *ProxyReconciler) aggregate(proxy *v1alpha1.Proxy) {
	n := replica.Desired(proxy)
	var ready []string
	var first *v1alpha1.ReplicaStatus
	for k := range n {
		sl := replica.Slot(proxy, k)
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
		r.setNotReady(proxy, reason, msg)
		return
	}
	msg := fmt.Sprintf("%d of %d replicas answer on port %d: %s", len(ready), n, proxy.Spec.Port, strings.Join(ready, ", "))
	r.setCondition(proxy, v1alpha1.ConditionProvisioned, true, v1alpha1.ReasonReady, msg)
	r.setCondition(proxy, v1alpha1.ConditionReady, true, v1alpha1.ReasonReady, msg)
}

// summarise fills what status shows of every Proxy's replicas before a
// write: replica 0's entry mirrors status.instance (and, for one replica,
// the Ready condition), the ready/desired count, and Degraded naming the
// replicas that do not answer.
func (r *ProxyReconciler) summarise(proxy *v1alpha1.Proxy) {
	s := &proxy.Status
	n := replica.Desired(proxy)
	zero := replica.Slot(proxy, 0)
	zero.Instance, zero.Replacement = s.Instance.DeepCopy(), s.Replacement.DeepCopy()
	if !replica.Multi(proxy) {
		zero.Ready = meta.IsStatusConditionTrue(s.Conditions, v1alpha1.ConditionReady)
		zero.Reason, zero.Message = conditionReason(s.Conditions, v1alpha1.ConditionReady), ""
		if c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady); c != nil {
			zero.Message = c.Message
		}
		zero.Address = ""
		if zero.Ready {
			zero.Address = s.Address
		}
	}
	var missing []string
	ready := 0
	for k := range n {
		sl := replica.Slot(proxy, k)
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
		r.setCondition(proxy, v1alpha1.ConditionDegraded, true, v1alpha1.ReasonReplicasNotReady,
			fmt.Sprintf("%d of %d replicas answer; not answering: %s", ready, n, strings.Join(missing, ", ")))
	} else {
		r.setCondition(proxy, v1alpha1.ConditionDegraded, false, v1alpha1.ReasonAllReplicasReady, fmt.Sprintf("all %d replicas answer", n))
	}
}
