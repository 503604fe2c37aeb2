package proxy

import (
	"context"
	"fmt"
	"strconv"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/addresses"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/instances"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/operation"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// A Proxy with a static address is replaced break-before-make: the new VM
// needs the address the old one holds, and two guests on one address
// would answer in turn. So is one whose provider keeps the replica's
// egress address (keepsEgress). Every VM of the replica is deleted first (clearReplica),
// the reconcile waits until the provider lists none of them, and only
// then is the replacement made, on the same address (docs/addresses.md
// states the outage and each crash point). A replacement onto another
// pool's address goes the same way, so the old address is released only
// once its VM is gone and no retire runs unwatched.

// keepsEgress reports whether the entry's provider keeps an egress address
// per replica (contract §3.1). Its replacement takes the address at its
// Create (the newest instance holds it), so, made beside the old VM, it
// would take it from the VM still serving, whose clients' connections
// would then leave from another address until it is deleted.
func keepsEgress(entry *providers.Entry) bool { return providers.Keeper(entry.Provider) != nil }

// replacedOn says what a break-before-make replacement keeps: its static
// address, or the replica's egress address.
func replacedOn(next *v1alpha1.InstanceRef) string {
	if next.Address == "" {
		return "keeping the replica's egress address"
	}
	return "on address " + addresses.IPOf(next.Address)
}

// breakBeforeMake takes the current instance out of service, deletes
// every VM of replica k (clearReplica) and, once the provider lists none, makes
// the replacement the instance to create.
func (r *Reconciler) breakBeforeMake(ctx context.Context, proxy *v1alpha1.Proxy, entry *providers.Entry, k int) (ctrl.Result, error) {
	ro := role{index: k, repl: true}
	instance, replacement := replica.Refs(proxy, k)
	old, next := *instance, *replacement
	down := "the proxy is down until the new one answers"
	if replica.Multi(proxy) {
		down = "this replica is out of the Service until the new one answers; the others serve"
	}
	r.setReplicaNotReady(proxy, k, v1alpha1.ReasonReplacing, fmt.Sprintf(
		"replacing instance %s with %s %s: the old VM is deleted first, and %s", old.Name, next.Name, replacedOn(next), down))
	drain := time.Duration(0)
	if id := old.ProviderID; id != "" && replica.Multi(proxy) {
		// The others serve on: the Service stops sending clients to this
		// replica, and the clients it has get the drain, before its VM
		// goes.
		if err := r.publishService(ctx, proxy); err != nil {
			return r.serviceError(ctx, proxy, ro, err)
		}
		if drain = r.memory.Drain(id, r.Timing.Drain); drain > 0 {
			r.setReplicaNotReady(proxy, k, v1alpha1.ReasonReplacing, fmt.Sprintf(
				"replacing instance %s with %s %s: out of the Service, draining for %s before the old VM is deleted",
				old.Name, next.Name, replacedOn(next), secondsUp(drain)))
		}
	}
	if err := r.writeStatus(ctx, proxy); err != nil {
		return ctrl.Result{}, err
	}
	if drain > 0 {
		return ctrl.Result{RequeueAfter: drain}, nil
	}
	found, done, err := r.clearReplica(ctx, proxy, entry, k, "Replace", "to make "+next.Name+" on its address", false)
	switch {
	case !done:
		return r.awaitingOperation(), nil
	case err != nil:
		return r.providerErrorFor(ctx, proxy, ro, found.Failed, err)
	case len(found.Left) > 0:
		return ctrl.Result{RequeueAfter: r.Timing.Poll}, nil
	}
	// The write above replaced the status: look the refs up again.
	instance, replacement = replica.Refs(proxy, k)
	*instance, *replacement = next, nil
	r.setReplicaNotReady(proxy, k, v1alpha1.ReasonProvisioning, fmt.Sprintf("creating instance %s", next.Name))
	return ctrl.Result{RequeueAfter: time.Millisecond}, r.writeStatus(ctx, proxy)
}

// clearReplica deletes every VM of replica k: each instance the provider lists
// under the Proxy's UID mark but the ones the status records for its other
// replicas, recorded or not (a Create cut off after its power-on left no
// ID to delete by). Replica k's VMs are all gone once found.Left is empty;
// done is false while the operation runs (its end reconciles the Proxy).
// action and why go into the events of the VMs deleted. With
// releaseEgress (the replica is removed, not replaced), the egress
// address kept for it is released once its VMs are gone.
func (r *Reconciler) clearReplica(ctx context.Context, proxy *v1alpha1.Proxy, entry *providers.Entry, k int, action, why string, releaseEgress bool) (found instances.Swept, done bool, err error) {
	uid, spare := string(proxy.UID), replica.Others(proxy, k)
	found, done, err = operation.AwaitIn(ctx, r.ops, proxy, replica.Lane(proxy, k), entry.Name, operation.Call{Method: operation.MethodClear, Arg: strconv.Itoa(k)}, func(ctx context.Context) (instances.Swept, error) {
		if releaseEgress {
			return instances.SweepAndRelease(ctx, entry.Provider, entry.Owner, uid, spare, k)
		}
		return instances.Sweep(ctx, entry.Provider, uid, spare)
	})
	for _, inst := range found.Deleted {
		r.forget(inst.ProviderID)
		r.record(proxy, instanceDeleted(action, inst.Name, inst.ProviderID, " "+why+replica.Describe(proxy, k)))
	}
	for _, e := range found.Released {
		r.record(proxy, egressReleased(action, e))
	}
	return found, done, err
}

// awaitAddress holds a Proxy whose address cannot be allocated yet. A
// Proxy that serves already keeps serving (its new pool is full, say);
// one without a VM says why it waits. A freed address or a new pool wakes
// it (the watches in SetupWithManager); the resync is a safety net.
func (r *Reconciler) awaitAddress(ctx context.Context, proxy *v1alpha1.Proxy, w *addresses.Wait) (ctrl.Result, error) {
	if s := proxy.Status.Instance; s == nil || s.ProviderID == "" {
		replica.SetNotReady(proxy, w.Reason, w.Msg)
	}
	return ctrl.Result{RequeueAfter: r.Timing.Resync}, r.writeStatus(ctx, proxy)
}

// addressOf is a network's address as an InstanceRef records it: "" for
// none.
func addressOf(n *contract.StaticNetwork) string {
	if n == nil {
		return ""
	}
	return n.Address.String()
}

// secondsUp is d in whole seconds, rounded up: a drain under way never
// reads "0s", and a reconcile during it writes the same message.
func secondsUp(d time.Duration) time.Duration {
	return (d + time.Second - 1).Truncate(time.Second)
}
