package addresses

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// One replica's address (allocate holds one per replica): the pool it
// comes from, the one it holds or claims, and who holds a pinned one.

// usablePool reads the Proxy's pool and checks it may serve the Proxy; a
// *Wait says why not.
func (al *Allocator) usablePool(ctx context.Context, proxy *v1alpha1.Proxy) (*v1alpha1.AddressPool, Pool, error) {
	poolName := proxy.Spec.AddressPool
	var pool v1alpha1.AddressPool
	if err := al.Client.Get(ctx, client.ObjectKey{Name: poolName}, &pool); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, Pool{}, al.addressWait(proxy, v1alpha1.ReasonPoolNotFound, fmt.Sprintf("spec.addressPool: AddressPool %q not found", poolName))
		}
		return nil, Pool{}, err
	}
	pn, err := Parse(&pool.Spec)
	if err != nil {
		return nil, pn, al.addressWait(proxy, v1alpha1.ReasonPoolInvalid, fmt.Sprintf("AddressPool %q: %v", poolName, err))
	}
	if pool.Spec.Provider != proxy.Spec.Provider {
		return nil, pn, al.addressWait(proxy, v1alpha1.ReasonPoolInvalid,
			fmt.Sprintf("spec.addressPool: AddressPool %q is for provider %q, not %q", poolName, pool.Spec.Provider, proxy.Spec.Provider))
	}
	if pool.Spec.Region != "" && pool.Spec.Region != proxy.Spec.Placement.Region {
		return nil, pn, al.addressWait(proxy, v1alpha1.ReasonPoolInvalid,
			fmt.Sprintf("spec.addressPool: AddressPool %q is for region %q, not %q", poolName, pool.Spec.Region, proxy.Spec.Placement.Region))
	}
	var pools v1alpha1.AddressPoolList
	if err := al.Client.List(ctx, &pools); err != nil {
		return nil, pn, err
	}
	if o := OverlapOf(&pool, pn, pools.Items); o != nil {
		return nil, pn, al.addressWait(proxy, v1alpha1.ReasonPoolOverlaps, o.Message(poolName, pool.Spec.Provider))
	}
	return &pool, pn, nil
}

// allocateReplica returns the ProxyAddress replica k holds, claiming one
// (spec.addresses[k] when it pins one) if it holds none.
func (al *Allocator) allocateReplica(ctx context.Context, proxy *v1alpha1.Proxy, pool *v1alpha1.AddressPool, pn Pool,
	held []v1alpha1.ProxyAddress, k int) (*v1alpha1.ProxyAddress, error) {
	var pinned *netip.Addr
	if k < len(proxy.Spec.Addresses) {
		a, err := netip.ParseAddr(string(proxy.Spec.Addresses[k]))
		if err != nil || !pn.Contains(a) {
			return nil, al.addressWait(proxy, v1alpha1.ReasonAddressTaken,
				fmt.Sprintf("spec.addresses[%d]: %s is not an address AddressPool %q hands out", k, proxy.Spec.Addresses[k], pool.Name))
		}
		pinned = &a
	}
	if mine := wanted(held, pool.Name, pinned, proxy, k); mine != nil {
		return mine, nil
	}
	mine, err := al.claimAddress(ctx, proxy, pool, pn, held, pinned, k)
	if err != nil {
		return nil, err
	}
	al.event(proxy, corev1.EventTypeNormal, v1alpha1.ReasonAddressesAllocated, "Allocate",
		fmt.Sprintf("allocated %s from AddressPool %s (ProxyAddress %s)%s", mine.Spec.Address, pool.Name, mine.Name, replica.Describe(proxy, k)))
	return mine, nil
}

// pinnedHeld reads the holder of a pinned address that is taken: this
// Proxy (its own Create the cache had not shown), another live Proxy
// (AddressTaken), or one being deleted or gone whose VM may still hold it
// (AddressPending: its release wakes this Proxy).
func (al *Allocator) pinnedHeld(ctx context.Context, proxy *v1alpha1.Proxy, name string, a netip.Addr, k int) (*v1alpha1.ProxyAddress, error) {
	var pa v1alpha1.ProxyAddress
	if err := al.APIReader.Get(ctx, client.ObjectKey{Name: name}, &pa); err != nil {
		return nil, fmt.Errorf("reading ProxyAddress %s: %w", name, err)
	}
	ref := pa.Spec.Proxy
	field := fmt.Sprintf("spec.addresses[%d]", k)
	if ref.UID == string(proxy.UID) && int(pa.Spec.Replica) == k {
		return &pa, nil
	}
	if ref.UID == string(proxy.UID) {
		// The pins moved between replicas: the other replica's VM still
		// holds the address, and releases it once gone.
		return nil, al.addressWait(proxy, v1alpha1.ReasonAddressPending,
			fmt.Sprintf("%s: %s is held by replica %d of this Proxy; it is released once that replica's VM is gone", field, a, pa.Spec.Replica))
	}
	var holder v1alpha1.Proxy
	err := al.APIReader.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &holder)
	switch {
	case err == nil && string(holder.UID) == ref.UID && holder.DeletionTimestamp.IsZero():
		return nil, al.addressWait(proxy, v1alpha1.ReasonAddressTaken,
			fmt.Sprintf("%s: %s is held by Proxy %s/%s (ProxyAddress %s)", field, a, ref.Namespace, ref.Name, name))
	case err == nil && string(holder.UID) == ref.UID:
		return nil, al.addressWait(proxy, v1alpha1.ReasonAddressPending,
			fmt.Sprintf("%s: %s is held by Proxy %s/%s, being deleted; it is released once that Proxy's VM is gone", field, a, ref.Namespace, ref.Name))
	case err == nil || apierrors.IsNotFound(err):
		return nil, al.addressWait(proxy, v1alpha1.ReasonAddressPending,
			fmt.Sprintf("%s: %s is held by a deleted Proxy %s/%s (uid %s); the garbage collector releases it once its VM is gone", field, a, ref.Namespace, ref.Name, ref.UID))
	default:
		return nil, fmt.Errorf("reading Proxy %s/%s, holder of %s: %w", ref.Namespace, ref.Name, a, err)
	}
}
