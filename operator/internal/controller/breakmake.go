package controller

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// A Proxy with a static address is replaced break-before-make: the new VM
// needs the address the old one holds, and two guests on one address
// would answer in turn. The old VM is deleted, the reconcile waits until
// the provider no longer finds it, and only then is the replacement made,
// on the same address (docs/addresses.md states the outage). A replacement
// onto another pool's address goes the same way, so the old address is
// released only once its VM is gone and no retire runs unwatched.

// breaksBeforeMake reports whether the Proxy's replacement must wait for
// its current VM to be gone: either holds a static address.
func breaksBeforeMake(proxy *v1alpha1.Proxy, k int) bool {
	instance, replacement := refs(proxy, k)
	inst, repl := *instance, *replacement
	return inst != nil && repl != nil && (inst.Address != "" || repl.Address != "")
}

// breakBeforeMake deletes the current instance and, once the provider
// answers NotFound for it, makes the replacement the instance to create.
func (r *ProxyReconciler) breakBeforeMake(ctx context.Context, proxy *v1alpha1.Proxy, entry *providers.Entry, k int) (ctrl.Result, error) {
	ro := role{index: k, repl: true}
	instance, replacement := refs(proxy, k)
	old, next := *instance, *replacement
	if old.ProviderID != "" {
		down := "the proxy is down until the new one answers"
		if multi(proxy) {
			down = "this replica is out of the Service until the new one answers; the others serve"
		}
		msg := fmt.Sprintf("replacing instance %s with %s on address %s: the old VM is deleted first, and %s",
			old.Name, next.Name, ipOf(next.Address), down)
		r.setReplicaNotReady(proxy, k, v1alpha1.ReasonReplacing, msg)
		id, uid := old.ProviderID, string(proxy.UID)
		drain := time.Duration(0)
		if multi(proxy) {
			// The others serve on: the Service stops sending clients to
			// this replica, and the clients it has get the drain, before
			// its VM goes.
			if err := r.ensureService(ctx, proxy); err != nil {
				return r.serviceError(ctx, proxy, ro, err)
			}
			if drain = r.drains.remaining(id, r.Timing.Drain); drain > 0 {
				r.setReplicaNotReady(proxy, k, v1alpha1.ReasonReplacing, fmt.Sprintf(
					"replacing instance %s with %s on address %s: out of the Service, draining for %s before the old VM is deleted",
					old.Name, next.Name, ipOf(next.Address), drain.Round(time.Second)))
			}
		}
		if err := r.writeStatus(ctx, proxy); err != nil {
			return ctrl.Result{}, err
		}
		if drain > 0 {
			return ctrl.Result{RequeueAfter: drain}, nil
		}
		gone, done, err := awaitIn(ctx, r.ops, proxy, lane(proxy, k), entry.Name, call{methodDelete, id}, func(ctx context.Context) (bool, error) {
			return deleteAndConfirm(ctx, entry.Provider, id, uid)
		})
		if !done {
			return r.awaitingOperation(), nil
		}
		if err != nil {
			return r.providerErrorFor(ctx, proxy, ro, "Delete", err)
		}
		if !gone {
			return ctrl.Result{RequeueAfter: r.Timing.Poll}, nil
		}
		r.forget(id)
		r.event(proxy, corev1.EventTypeNormal, "Deleted", "Replace", fmt.Sprintf("deleted instance %s (%s) to make %s on its address%s", old.Name, id, next.Name, ofReplica(proxy, k)))
	}
	// The write above replaced the status: look the refs up again.
	instance, replacement = refs(proxy, k)
	*instance, *replacement = next, nil
	r.setReplicaNotReady(proxy, k, v1alpha1.ReasonProvisioning, fmt.Sprintf("creating instance %s", next.Name))
	return ctrl.Result{RequeueAfter: time.Millisecond}, r.writeStatus(ctx, proxy)
}

// deleteAndConfirm deletes the Proxy's instance id and reports whether the
// provider no longer finds it. An instance that does not carry the
// Proxy's UID is not deleted.
func deleteAndConfirm(ctx context.Context, prov contract.Provider, id, uid string) (bool, error) {
	inst, err := prov.Get(ctx, id)
	if errors.Is(err, contract.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if !carriesUID(inst, uid) {
		return false, fmt.Errorf("instance %s does not carry the Proxy's UID; it is left alone: %w", id, contract.ErrPermanent)
	}
	// Terminated too: a cut-off Delete leaves one nothing else finishes
	// (look).
	if err := prov.Delete(ctx, id); err != nil {
		return false, err
	}
	if _, err = prov.Get(ctx, id); errors.Is(err, contract.ErrNotFound) {
		return true, nil
	}
	return false, err
}

// awaitAddress holds a Proxy whose address cannot be allocated yet. A
// Proxy that serves already keeps serving (its new pool is full, say);
// one without a VM says why it waits. A freed address or a new pool wakes
// it (the watches in SetupWithManager); the resync is a safety net.
func (r *ProxyReconciler) awaitAddress(ctx context.Context, proxy *v1alpha1.Proxy, w *waitAddress) (ctrl.Result, error) {
	if s := proxy.Status.Instance; s == nil || s.ProviderID == "" {
		r.setNotReady(proxy, w.reason, w.msg)
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

// ipOf is the IP of a recorded address: "" for none.
func ipOf(address string) string {
	p, err := netip.ParsePrefix(address)
	if err != nil {
		return ""
	}
	return p.Addr().String()
}
