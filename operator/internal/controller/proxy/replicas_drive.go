package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/addresses"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/endpoints"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// How a Proxy of more than one replica is reconciled: each replica is
// stepped in its own lane of operations (one replica's Create never waits
// for another's), the replicas beyond spec.replicas are removed, and the
// Service is pointed at every replica that answers.

// reconcileReplicas steps every wanted replica, removes the others, and
// writes the Service and the status.
func (r *Reconciler) reconcileReplicas(ctx context.Context, sc *scope, networks []*contract.StaticNetwork, waits []*addresses.Wait) (ctrl.Result, error) {
	proxy, entry := sc.proxy, sc.entry
	result := ctrl.Result{RequeueAfter: r.Timing.Resync}
	merge := func(res ctrl.Result) {
		if res.RequeueAfter > 0 {
			result = soonest(result, res.RequeueAfter)
		}
	}
	var errs []error
	for k := range replica.Desired(proxy) {
		replica.EnsureSlots(proxy)
		if r.ops.Running(replica.Lane(proxy, k)) {
			// Its end reconciles the Proxy; the poll is a safety net.
			merge(ctrl.Result{RequeueAfter: r.Timing.Poll})
			continue
		}
		if w := waits[k]; w != nil {
			// No address yet: a replica that serves keeps serving, one
			// without a VM says why it waits.
			if inst, _ := replica.Refs(proxy, k); *inst == nil || (*inst).ProviderID == "" {
				replica.SetReplica(proxy, k, false, "", w.Reason, w.Msg)
			}
			continue
		}
		res, err := r.step(ctx, sc, k, networks[k])
		if apierrors.IsConflict(err) {
			return res, err
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		merge(res)
	}
	// The Service first: it stops sending clients to the replicas being
	// removed before their VMs go, and none goes while it may still.
	if err := r.publishService(ctx, proxy); err != nil {
		if conflict := endpoints.AsConflict(err); conflict != nil {
			return r.reportConflict(ctx, proxy, conflict)
		}
		errs = append(errs, err)
	} else {
		merge(r.removeReplicas(ctx, proxy, entry))
	}
	if err := r.writeStatus(ctx, proxy); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return ctrl.Result{}, errors.Join(errs...)
	}
	return result, nil
}

// serveReplica makes a running, answering instance its replica's serving
// one: a replacement takes over (the old VM is deleted), and the Service
// points at every replica that answers.
func (r *Reconciler) serveReplica(ctx context.Context, proxy *v1alpha1.Proxy, entry *providers.Entry, ro role) (ctrl.Result, error) {
	instance, replacement := replica.Refs(proxy, ro.index)
	var old *v1alpha1.InstanceRef
	if ro.repl {
		old = *instance
		*instance, *replacement = *replacement, nil
	}
	inst := *instance
	wasReady := replica.Slot(proxy, ro.index).Ready
	replica.SetReplica(proxy, ro.index, true, inst.IP, v1alpha1.ReasonReady,
		fmt.Sprintf("instance %s answers at %s:%d", inst.Name, inst.IP, replica.PortOf(proxy, inst)))
	s := &proxy.Status
	if ro.index == 0 {
		s.Address = inst.IP
	}
	s.Endpoint = fmt.Sprintf("http://%s.%s.svc:%d", proxy.Name, proxy.Namespace, proxy.Spec.Port)
	s.LastError = nil
	if err := r.publishService(ctx, proxy); err != nil {
		if conflict := endpoints.AsConflict(err); conflict != nil {
			return r.reportConflict(ctx, proxy, conflict)
		}
		// The replica answers: a failed write of the Service (a stale
		// cache's conflict, say) says nothing about it, and must not take
		// it out of service or let another replica's replacement start.
		// Nothing is recorded; the next reconcile serves it again.
		r.record(proxy, serviceUnavailable(err))
		return ctrl.Result{}, err
	}
	if err := r.writeStatus(ctx, proxy); err != nil {
		return ctrl.Result{}, err
	}
	switch {
	case old != nil:
		r.record(proxy, replaced(inst.Name, inst.IP, fmt.Sprintf(" replica %d", ro.index), old.Name))
		r.retire(ctx, proxy, entry, old, "replaced", r.Timing.Drain)
	case !wasReady:
		r.record(proxy, answers(fmt.Sprintf("replica %d", ro.index), inst.IP, replica.PortOf(proxy, inst)))
	}
	return ctrl.Result{RequeueAfter: r.Timing.Resync}, nil
}

// removeReplicas deletes the VMs of the replicas beyond spec.replicas,
// highest index first, and drops a replica's entry once the provider no
// longer finds its VMs: only then is its address released (allocate's
// releaseUnused finds no instance made with it).
func (r *Reconciler) removeReplicas(ctx context.Context, proxy *v1alpha1.Proxy, entry *providers.Entry) ctrl.Result {
	n := replica.Desired(proxy)
	var extra []int
	for _, sl := range proxy.Status.Replicas {
		if int(sl.Index) >= n && sl.Index > 0 {
			extra = append(extra, int(sl.Index))
		}
	}
	result := ctrl.Result{}
	for i := len(extra) - 1; i >= 0; i-- {
		k := extra[i]
		l := replica.Lane(proxy, k)
		if r.ops.Running(l) {
			result = soonest(result, r.Timing.Poll)
			continue
		}
		sl := replica.Slot(proxy, k)
		// Out of the Service already (ensureService counts only the wanted
		// replicas); the status says what holds its address.
		sl.Ready, sl.Address, sl.Reason = false, "", v1alpha1.ReasonRemoving
		sl.Message = fmt.Sprintf("replica %d is beyond spec.replicas: deleting its VMs; its address is released once they are gone", k)
		drain := time.Duration(0)
		for _, ref := range []*v1alpha1.InstanceRef{sl.Replacement, sl.Instance} {
			if ref != nil && ref.ProviderID != "" {
				drain = max(drain, r.memory.Drain(ref.ProviderID, r.Timing.Drain))
			}
		}
		if drain > 0 {
			sl.Message = fmt.Sprintf("replica %d is beyond spec.replicas: out of the Service, draining for %s before its VMs are deleted; its address is released once they are gone",
				k, drain.Round(time.Second))
			result = soonest(result, drain)
			continue
		}
		// Every VM of the replica, recorded or not: one a cut-off Create
		// made holds the address as much as the recorded ones.
		found, done, err := r.clearReplica(ctx, proxy, entry, k, "ScaleDown", fmt.Sprintf("of removed replica %d", k), true)
		if err != nil {
			r.record(proxy, deleteFailed("ScaleDown", fmt.Sprintf("deleting the VMs of removed replica %d: %s: %v", k, found.Failed, err)))
		}
		gone := done && err == nil && len(found.Left) == 0
		if !gone {
			result = soonest(result, r.Timing.Poll)
			continue
		}
		replica.DropSlot(proxy, k)
		r.record(proxy, replicaRemoved(k))
		result = ctrl.Result{RequeueAfter: time.Millisecond}
	}
	return result
}

// soonest is res, or a requeue after d if that comes sooner.
func soonest(res ctrl.Result, d time.Duration) ctrl.Result {
	if res.RequeueAfter == 0 || d < res.RequeueAfter {
		res.RequeueAfter = d
	}
	return res
}

// setReplicaNotReady records that replica k does not answer, for reason.
func (r *Reconciler) setReplicaNotReady(proxy *v1alpha1.Proxy, k int, reason, msg string) {
	if !replica.Multi(proxy) {
		replica.SetNotReady(proxy, reason, msg)
		return
	}
	replica.SetReplica(proxy, k, false, "", reason, msg)
}

// staleForALane reports whether an operation of one of the Proxy's lanes
// ended since a status the cache may not hold yet.
func (r *Reconciler) staleForALane(proxy *v1alpha1.Proxy) bool {
	n := replica.Desired(proxy)
	for _, sl := range proxy.Status.Replicas {
		n = max(n, int(sl.Index)+1)
	}
	for k := range n {
		if rv, ended := r.ops.StartedAt(replica.Lane(proxy, k)); ended && rv != proxy.ResourceVersion {
			return true
		}
	}
	return false
}
