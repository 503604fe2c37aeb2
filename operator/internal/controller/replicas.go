package controller

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// Replicas (spec.replicas, docs/operator.md). Replica 0's VMs stay in
// status.instance and status.replacement, where releases before replicas
// kept them: an upgraded operator finds a one-replica Proxy's VM where it
// was, under the same name and spec hash, and replaces nothing. Every
// other replica's VMs are in its entry of status.replicas. A one-replica
// Proxy keeps its readiness in the Ready condition as before; with more,
// each replica's is in its entry, and Ready (at least one answers) and
// Degraded (not all do) are derived from them (aggregate).

// desiredReplicas is spec.replicas; an object stored before the field
// existed reads as one.
func desiredReplicas(proxy *v1alpha1.Proxy) int {
	if proxy.Spec.Replicas < 1 {
		return 1
	}
	return int(proxy.Spec.Replicas)
}

// multi reports whether the Proxy's readiness is per replica: it wants
// more than one, or still has replicas beyond the first to remove.
func multi(proxy *v1alpha1.Proxy) bool {
	if desiredReplicas(proxy) > 1 {
		return true
	}
	for _, s := range proxy.Status.Replicas {
		if s.Index > 0 {
			return true
		}
	}
	return false
}

// slot returns replica k's entry of status.replicas, adding it if missing.
func slot(proxy *v1alpha1.Proxy, k int) *v1alpha1.ReplicaStatus {
	s := &proxy.Status
	for i := range s.Replicas {
		if int(s.Replicas[i].Index) == k {
			return &s.Replicas[i]
		}
	}
	s.Replicas = append(s.Replicas, v1alpha1.ReplicaStatus{Index: int32(k)})
	slices.SortFunc(s.Replicas, func(a, b v1alpha1.ReplicaStatus) int { return int(a.Index - b.Index) })
	return slot(proxy, k)
}

// refs returns where replica k's instance and replacement are recorded.
func refs(proxy *v1alpha1.Proxy, k int) (instance, replacement **v1alpha1.InstanceRef) {
	if k == 0 {
		return &proxy.Status.Instance, &proxy.Status.Replacement
	}
	sl := slot(proxy, k)
	return &sl.Instance, &sl.Replacement
}

// refsIfAny returns replica k's instance and replacement, nil for a
// replica without an entry (it adds none).
func refsIfAny(proxy *v1alpha1.Proxy, k int) (instance, replacement *v1alpha1.InstanceRef) {
	if k == 0 {
		return proxy.Status.Instance, proxy.Status.Replacement
	}
	for _, s := range proxy.Status.Replicas {
		if int(s.Index) == k {
			return s.Instance, s.Replacement
		}
	}
	return nil, nil
}

// allRefs are every instance the status records, of every replica.
func allRefs(proxy *v1alpha1.Proxy) []*v1alpha1.InstanceRef {
	out := []*v1alpha1.InstanceRef{proxy.Status.Instance, proxy.Status.Replacement}
	for _, s := range proxy.Status.Replicas {
		if s.Index > 0 {
			out = append(out, s.Instance, s.Replacement)
		}
	}
	return out
}

// lane is replica k's lane of operations: replica 0 keeps the Proxy's UID,
// the lane of releases before replicas; each replica's calls then run
// beside the others'.
func lane(proxy *v1alpha1.Proxy, k int) types.UID {
	if k == 0 {
		return proxy.UID
	}
	return types.UID(fmt.Sprintf("%s/%d", proxy.UID, k))
}

// replicaSpec is the Proxy as replica k is made from it: its zone of
// placement.zones and its pinned address. For replica 0 of a Proxy
// without zones it is the Proxy itself, so its spec hash and its VM's name
// are those of releases before replicas.
func replicaSpec(proxy *v1alpha1.Proxy, k int) *v1alpha1.Proxy {
	spec := &proxy.Spec
	if len(spec.Placement.Zones) == 0 && (k == 0 && len(spec.Addresses) <= 1) {
		return proxy
	}
	p := proxy.DeepCopy()
	if zones := spec.Placement.Zones; len(zones) > 0 {
		p.Spec.Placement.Zone, p.Spec.Placement.Zones = zones[k%len(zones)], nil
	}
	p.Spec.Addresses = nil
	if k < len(spec.Addresses) {
		p.Spec.Addresses = spec.Addresses[k : k+1]
	}
	return p
}

// placementOf is the placement replica k is created with.
func placementOf(proxy *v1alpha1.Proxy, k int) contract.Placement {
	pl := replicaSpec(proxy, k).Spec.Placement
	return contract.Placement{Region: pl.Region, Zone: pl.Zone, MachineType: pl.MachineType, Image: pl.Image}
}

// replicaInstanceName is replica k's VM name for spec hash hash: replica
// 0's is instanceName's, unchanged.
func replicaInstanceName(proxy *v1alpha1.Proxy, hash string, k int) string {
	if k == 0 {
		return instanceName(proxy, hash)
	}
	return instanceName(proxy, fmt.Sprintf("%s/%d", hash, k))
}

// replicaReady reports whether replica k answers.
func replicaReady(proxy *v1alpha1.Proxy, k int) bool {
	if !multi(proxy) {
		return meta.IsStatusConditionTrue(proxy.Status.Conditions, v1alpha1.ConditionReady)
	}
	return slot(proxy, k).Ready
}

// mayStartReplacement reports whether replica k may start its
// replacement: no other replica is being replaced, none is coming up on
// the new spec (replaced break-before-make, it has no replacement any
// more, only a VM of the current spec that does not answer yet), and every
// other one answers, unless k does not answer either (it serves nobody,
// and waiting for the others could wait for ever). At most one replica is
// out of service for a rollout at a time; a new spec whose VM never
// answers halts the rollout.
func mayStartReplacement(proxy *v1alpha1.Proxy, k int, user []byte) bool {
	if !multi(proxy) {
		return true
	}
	selfReady := replicaReady(proxy, k)
	for j := range desiredReplicas(proxy) {
		if j == k {
			continue
		}
		inst, repl := refs(proxy, j)
		if *repl != nil {
			return false
		}
		if replicaReady(proxy, j) {
			continue
		}
		if selfReady || (*inst != nil && (*inst).SpecHash == specHash(replicaSpec(proxy, j), user)) {
			return false
		}
	}
	return true
}

// setReplica records replica k's state and derives the Proxy's
// conditions from all of them.
func (r *ProxyReconciler) setReplica(proxy *v1alpha1.Proxy, k int, ready bool, address, reason, msg string) {
	sl := slot(proxy, k)
	sl.Ready, sl.Reason, sl.Message = ready, reason, msg
	sl.Address = address
	r.aggregate(proxy)
}

// aggregate sets Ready (at least one replica answers) and Provisioned
// from the replicas' entries, for a Proxy of more than one replica.
func (r *ProxyReconciler) aggregate(proxy *v1alpha1.Proxy) {
	n := desiredReplicas(proxy)
	var ready []string
	var first *v1alpha1.ReplicaStatus
	for k := range n {
		sl := slot(proxy, k)
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
	n := desiredReplicas(proxy)
	zero := slot(proxy, 0)
	zero.Instance, zero.Replacement = s.Instance.DeepCopy(), s.Replacement.DeepCopy()
	if !multi(proxy) {
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
		sl := slot(proxy, k)
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

// portOf is the port ref's VM listens on: the one it was made with, or
// spec.port for a VM made before the operator recorded it.
func portOf(proxy *v1alpha1.Proxy, ref *v1alpha1.InstanceRef) int32 {
	if ref != nil && ref.Port != 0 {
		return ref.Port
	}
	return proxy.Spec.Port
}

// readyEndpoints are the addresses the Service sends clients to, by the
// port they listen on: the serving instance's for one replica (as before
// replicas), and every answering replica's otherwise; none when none
// answers. While replicas roll onto a new spec.port, the ones not
// replaced yet are still served on the old port.
func readyEndpoints(proxy *v1alpha1.Proxy) map[int32][]string {
	out := map[int32][]string{}
	if !multi(proxy) {
		out[proxy.Spec.Port] = []string{proxy.Status.Instance.IP}
		return out
	}
	for k := range desiredReplicas(proxy) {
		sl := slot(proxy, k)
		instance, _ := refs(proxy, k)
		if !sl.Ready || sl.Address == "" || *instance == nil {
			continue
		}
		port := portOf(proxy, *instance)
		if !slices.Contains(out[port], sl.Address) {
			out[port] = append(out[port], sl.Address)
		}
	}
	return out
}
