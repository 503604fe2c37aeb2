// Package replica holds what the operator knows of a Proxy's replicas as
// pure functions of the Proxy: how many it wants, where each one's VMs are
// recorded in the status, the names and hashes its VMs are made with, its
// lane of operations, and which replicas answer.
//
// Replica 0's VMs stay in status.instance and status.replacement, where
// releases before replicas kept them: an upgraded operator finds a
// one-replica Proxy's VM where it was, under the same name and spec hash,
// and replaces nothing. Every other replica's VMs are in its entry of
// status.replicas (docs/operator.md).
package replica

import (
	"fmt"
	"iter"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// Desired is spec.replicas; an object stored before the field
// existed reads as one.
func Desired(proxy *v1alpha1.Proxy) int {
	if proxy.Spec.Replicas < 1 {
		return 1
	}
	return int(proxy.Spec.Replicas)
}

// Multi reports whether the Proxy's readiness is per replica: it wants
// more than one, or still has replicas beyond the first to remove.
func Multi(proxy *v1alpha1.Proxy) bool {
	if Desired(proxy) > 1 {
		return true
	}
	for _, s := range proxy.Status.Replicas {
		if s.Index > 0 {
			return true
		}
	}
	return false
}

// Slot returns replica k's entry of status.replicas, adding it if missing.
func Slot(proxy *v1alpha1.Proxy, k int) *v1alpha1.ReplicaStatus {
	s := &proxy.Status
	for i := range s.Replicas {
		if int(s.Replicas[i].Index) == k {
			return &s.Replicas[i]
		}
	}
	s.Replicas = append(s.Replicas, v1alpha1.ReplicaStatus{Index: int32(k)})
	slices.SortFunc(s.Replicas, func(a, b v1alpha1.ReplicaStatus) int { return int(a.Index - b.Index) })
	return Slot(proxy, k)
}

// Refs returns where replica k's instance and replacement are recorded.
func Refs(proxy *v1alpha1.Proxy, k int) (instance, replacement **v1alpha1.InstanceRef) {
	if k == 0 {
		return &proxy.Status.Instance, &proxy.Status.Replacement
	}
	sl := Slot(proxy, k)
	return &sl.Instance, &sl.Replacement
}

// RefsIfAny returns replica k's instance and replacement, nil for a
// replica without an entry (it adds none).
func RefsIfAny(proxy *v1alpha1.Proxy, k int) (instance, replacement *v1alpha1.InstanceRef) {
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

// All are every instance the status records, of every replica.
func All(proxy *v1alpha1.Proxy) []*v1alpha1.InstanceRef {
	out := []*v1alpha1.InstanceRef{proxy.Status.Instance, proxy.Status.Replacement}
	for _, s := range proxy.Status.Replicas {
		if s.Index > 0 {
			out = append(out, s.Instance, s.Replacement)
		}
	}
	return out
}

// Others names the instances the status records for the Proxy's
// replicas other than k: each holds its own replica's address, never k's
// (a ProxyAddress is one replica's; a pin moved between replicas waits
// for the other's VM to go, the controller's pinnedHeld).
func Others(proxy *v1alpha1.Proxy, k int) map[string]bool {
	out := map[string]bool{}
	add := func(j int, refs ...*v1alpha1.InstanceRef) {
		for _, ref := range refs {
			if j != k && ref != nil && ref.Name != "" {
				out[ref.Name] = true
			}
		}
	}
	add(0, proxy.Status.Instance, proxy.Status.Replacement)
	for _, sl := range proxy.Status.Replicas {
		if sl.Index > 0 {
			add(int(sl.Index), sl.Instance, sl.Replacement)
		}
	}
	return out
}

// Lane is replica k's lane of operations: replica 0 keeps the Proxy's UID,
// the lane of releases before replicas; each replica's calls then run
// beside the others'.
func Lane(proxy *v1alpha1.Proxy, k int) types.UID {
	if k == 0 {
		return proxy.UID
	}
	return types.UID(fmt.Sprintf("%s/%d", proxy.UID, k))
}

// Spec is the Proxy as replica k is made from it: its zone of
// placement.zones and its pinned address. For replica 0 of a Proxy
// without zones it is the Proxy itself, so its spec hash and its VM's name
// are those of releases before replicas.
func Spec(proxy *v1alpha1.Proxy, k int) *v1alpha1.Proxy {
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

// Placement is the placement replica k is created with.
func Placement(proxy *v1alpha1.Proxy, k int) contract.Placement {
	pl := Spec(proxy, k).Spec.Placement
	return contract.Placement{Region: pl.Region, Zone: pl.Zone, MachineType: pl.MachineType, Image: pl.Image}
}

// InstanceName is replica k's VM name for spec hash hash: replica
// 0's is instanceName's, unchanged.
func InstanceName(proxy *v1alpha1.Proxy, hash string, k int) string {
	if k == 0 {
		return instanceName(proxy, hash)
	}
	return instanceName(proxy, fmt.Sprintf("%s/%d", hash, k))
}

// Ready reports whether replica k answers.
func Ready(proxy *v1alpha1.Proxy, k int) bool {
	if !Multi(proxy) {
		return meta.IsStatusConditionTrue(proxy.Status.Conditions, v1alpha1.ConditionReady)
	}
	return Slot(proxy, k).Ready
}

// MayStartReplacement reports whether replica k may start its
// replacement: no other replica is being replaced, none is coming up on
// the new spec (replaced break-before-make, it has no replacement any
// more, only a VM of the current spec that does not answer yet), and every
// other one answers, unless k does not answer either (it serves nobody,
// and waiting for the others could wait for ever). At most one replica is
// out of service for a rollout at a time; a new spec whose VM never
// answers halts the rollout.
func MayStartReplacement(proxy *v1alpha1.Proxy, k int, user []byte) bool {
	if !Multi(proxy) {
		return true
	}
	selfReady := Ready(proxy, k)
	for j := range Desired(proxy) {
		if j == k {
			continue
		}
		inst, repl := Refs(proxy, j)
		if *repl != nil {
			return false
		}
		if Ready(proxy, j) {
			continue
		}
		if selfReady || (*inst != nil && (*inst).SpecHash == SpecHash(Spec(proxy, j), user)) {
			return false
		}
	}
	return true
}

// PortOf is the port ref's VM listens on: the one it was made with, or
// spec.port for a VM made before the operator recorded it.
func PortOf(proxy *v1alpha1.Proxy, ref *v1alpha1.InstanceRef) int32 {
	if ref != nil && ref.Port != 0 {
		return ref.Port
	}
	return proxy.Spec.Port
}

// ServesStats reports whether the VM ref serves the statistics page: only
// one made from the default cloud-init this operator renders now (whose
// hash is current) does; any other proxy is asked for nothing it could
// forward or count as refused.
func ServesStats(proxy *v1alpha1.Proxy, ref *v1alpha1.InstanceRef, current string) bool {
	return proxy.Spec.CloudInit == nil && current != "" && ref.CloudInitHash == current
}

// ReadyEndpoints are the addresses the Service sends clients to, by the
// port they listen on: the serving instance's for one replica (as before
// replicas), and every answering replica's otherwise; none when none
// answers. While replicas roll onto a new spec.port, the ones not
// replaced yet are still served on the old port.
func ReadyEndpoints(proxy *v1alpha1.Proxy) map[int32][]string {
	out := map[int32][]string{}
	if !Multi(proxy) {
		out[proxy.Spec.Port] = []string{proxy.Status.Instance.IP}
		return out
	}
	for sl, instance := range serving(proxy) {
		port := PortOf(proxy, instance)
		if !slices.Contains(out[port], sl.Address) {
			out[port] = append(out[port], sl.Address)
		}
	}
	return out
}

// ServingVMs are the providerIDs of the VMs ReadyEndpoints sends clients
// to, for a Proxy of replicas (one of one replica never drains).
func ServingVMs(proxy *v1alpha1.Proxy) []string {
	var out []string
	if !Multi(proxy) {
		return out
	}
	for _, instance := range serving(proxy) {
		if instance.ProviderID != "" {
			out = append(out, instance.ProviderID)
		}
	}
	return out
}

// serving yields each wanted replica that answers with its address, and
// its serving instance.
func serving(proxy *v1alpha1.Proxy) iter.Seq2[*v1alpha1.ReplicaStatus, *v1alpha1.InstanceRef] {
	return func(yield func(*v1alpha1.ReplicaStatus, *v1alpha1.InstanceRef) bool) {
		for k := range Desired(proxy) {
			sl := Slot(proxy, k)
			instance, _ := Refs(proxy, k)
			if !sl.Ready || sl.Address == "" || *instance == nil {
				continue
			}
			if !yield(sl, *instance) {
				return
			}
		}
	}
}

// EnsureSlots gives every wanted replica its entry before any pointer
// into status.replicas is taken, so none moves under a holder.
func EnsureSlots(proxy *v1alpha1.Proxy) {
	for k := range Desired(proxy) {
		Slot(proxy, k)
	}
}

// DropSlot removes replica k's entry.
func DropSlot(proxy *v1alpha1.Proxy, k int) {
	s := &proxy.Status
	out := s.Replicas[:0]
	for _, sl := range s.Replicas {
		if int(sl.Index) != k {
			out = append(out, sl)
		}
	}
	s.Replicas = out
}

// BreaksBeforeMake reports whether replica k's replacement must wait for
// its current VM to be gone: either holds a static address, or the
// provider keeps the replica's egress address (keepsEgress), which the
// replacement would take from the serving VM at its Create
// (docs/addresses.md).
func BreaksBeforeMake(proxy *v1alpha1.Proxy, k int, keepsEgress bool) bool {
	instance, replacement := Refs(proxy, k)
	inst, repl := *instance, *replacement
	return inst != nil && repl != nil && (keepsEgress || inst.Address != "" || repl.Address != "")
}

// Observe copies what the provider said about an instance into its ref.
func Observe(ref *v1alpha1.InstanceRef, inst contract.Instance) {
	ref.ProviderID, ref.State, ref.IP = inst.ProviderID, string(inst.State), inst.IP
	if inst.EgressIP != "" {
		// Kept while the VM lives (contract §3.1); a Get of a VM that is
		// not Running may not say it.
		ref.EgressIP = inst.EgressIP
	}
	if !inst.CreatedAt.IsZero() {
		// In whole seconds, as the API server keeps it: a backend's
		// sub-second digits (vSphere's) would make every resync's status
		// differ from the cached one and send a write.
		t := metav1.NewTime(inst.CreatedAt).Rfc3339Copy()
		ref.CreatedAt = &t
	}
}
