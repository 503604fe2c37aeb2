package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/addresses"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// Static addresses (docs/addresses.md). A Proxy with spec.addressPool
// holds one ProxyAddress per replica; creating it is the allocation. Its
// name is the provider entry's and the address's, so the API server lets
// only one Proxy hold an address, whichever pool of the entry it comes
// from, across operator replicas and restarts, with no lock: a Create that
// meets AlreadyExists moves to the next address. A ProxyAddress is deleted
// only once no VM holds its address: when the Proxy's deletion has seen
// its VMs gone, or, for an address the Proxy no longer wants, when no
// instance in its status was made with it.

// indexAddressPool indexes Proxies by spec.addressPool, so a freed address
// or a new pool wakes the Proxies waiting on that pool.
const indexAddressPool = "spec.addressPool"

// waitAddress says why the Proxy has no address yet.
type waitAddress struct {
	reason, msg string
}

func (w *waitAddress) Error() string { return w.msg }

// allocate makes sure each of the Proxy's replicas holds its static
// address and returns the networks its VMs are made with, by replica
// index: nil for a Proxy without a pool. An error that is a *waitAddress
// holds the whole Proxy (its pool is missing or invalid); waits[k] says
// why replica k alone has no address yet (the pool is exhausted, its
// pinned address is taken). The Proxy's own ProxyAddresses are read from
// the API server, not the cache: one made by the last reconcile is found
// even before the cache has it, and never allocated twice.
func (r *ProxyReconciler) allocate(ctx context.Context, proxy *v1alpha1.Proxy) (networks []*contract.StaticNetwork, waits []*waitAddress, err error) {
	n := replica.Desired(proxy)
	networks, waits = make([]*contract.StaticNetwork, n), make([]*waitAddress, n)
	poolName := proxy.Spec.AddressPool
	if poolName == "" {
		if !mayHoldAddresses(proxy) {
			// Never had a pool, or everything released: no read at all.
			return networks, waits, nil
		}
		held, err := r.heldAddresses(ctx, proxy)
		if err != nil {
			return nil, nil, err
		}
		if err := r.releaseUnused(ctx, proxy, held, nil); err != nil {
			return nil, nil, err
		}
		if len(held) == 0 || !anyInstanceAddress(proxy) {
			proxy.Status.Addresses = nil
			meta.RemoveStatusCondition(&proxy.Status.Conditions, v1alpha1.ConditionAddressesAllocated)
		}
		return networks, waits, nil
	}
	held, err := r.heldAddresses(ctx, proxy)
	if err != nil {
		return nil, nil, err
	}
	pool, pn, err := r.usablePool(ctx, proxy)
	if err != nil {
		return nil, nil, err
	}
	keep := map[string]bool{}
	var ips []string
	var firstWait *waitAddress
	for k := range n {
		mine, err := r.allocateReplica(ctx, proxy, pool, pn, held, k)
		if w := (*waitAddress)(nil); errors.As(err, &w) {
			waits[k] = w
			firstWait = cmp.Or(firstWait, w)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		network, err := addresses.NetworkOf(mine)
		if err != nil {
			w := r.waitFor(proxy, v1alpha1.ReasonPoolInvalid, fmt.Sprintf("ProxyAddress %s: %v", mine.Name, err))
			waits[k], firstWait = w, cmp.Or(firstWait, w)
			continue
		}
		keep[mine.Name] = true
		networks[k] = &network
		ips = append(ips, network.IP())
	}
	if err := r.releaseUnused(ctx, proxy, held, keep); err != nil {
		return nil, nil, err
	}
	proxy.Status.Addresses = ips
	if firstWait != nil {
		// Every waiting replica's message, under the first one's reason.
		var msgs []string
		for _, w := range waits {
			if w != nil && !slices.Contains(msgs, w.msg) {
				msgs = append(msgs, w.msg)
			}
		}
		replica.SetCondition(proxy, v1alpha1.ConditionAddressesAllocated, false, firstWait.reason, strings.Join(msgs, "; "))
		return networks, waits, nil
	}
	msg := fmt.Sprintf("%s from AddressPool %s", networks[0].Address, poolName)
	if n > 1 {
		msg = fmt.Sprintf("%d addresses from AddressPool %s: %s", n, poolName, strings.Join(ips, ", "))
	}
	replica.SetCondition(proxy, v1alpha1.ConditionAddressesAllocated, true, v1alpha1.ReasonAddressesAllocated, msg)
	return networks, waits, nil
}

// mayHoldAddresses reports whether a Proxy without a pool may still hold
// addresses to release: its status shows one, or an instance was made
// with one.
func mayHoldAddresses(proxy *v1alpha1.Proxy) bool {
	return len(proxy.Status.Addresses) > 0 || anyInstanceAddress(proxy)
}

// anyInstanceAddress reports whether an instance in the status was made
// with a static address.
func anyInstanceAddress(proxy *v1alpha1.Proxy) bool {
	for _, ref := range replica.All(proxy) {
		if ref != nil && ref.Address != "" {
			return true
		}
	}
	return false
}

// heldAddresses lists the Proxy's ProxyAddresses from the API server.
func (r *ProxyReconciler) heldAddresses(ctx context.Context, proxy *v1alpha1.Proxy) ([]v1alpha1.ProxyAddress, error) {
	var list v1alpha1.ProxyAddressList
	if err := r.APIReader.List(ctx, &list, client.MatchingLabels{v1alpha1.LabelProxyUID: string(proxy.UID)}); err != nil {
		return nil, fmt.Errorf("listing the Proxy's ProxyAddresses: %w", err)
	}
	return list.Items, nil
}

// wanted returns the held address the Proxy's replica k keeps: of its
// pool, and the pinned one when spec.addresses pins one. Of several (two
// operator replicas allocated for one Proxy at once, before either saw the
// other's ProxyAddress), it is the one an instance of replica k was made
// with, else one the status shows, else the first by name: every operator
// replica picks the same, and the others are released (releaseUnused).
// The status write before any Create is conditional on the Proxy's
// resourceVersion, so only one of them can have reached a VM.
func wanted(held []v1alpha1.ProxyAddress, pool string, pinned *netip.Addr, proxy *v1alpha1.Proxy, k int) *v1alpha1.ProxyAddress {
	var candidates []*v1alpha1.ProxyAddress
	for i := range held {
		h := &held[i]
		if h.Spec.Pool != pool || int(h.Spec.Replica) != k || !h.DeletionTimestamp.IsZero() {
			continue
		}
		if pinned != nil {
			if p, err := netip.ParsePrefix(h.Spec.Address); err != nil || p.Addr() != *pinned {
				continue
			}
		}
		candidates = append(candidates, h)
	}
	if len(candidates) == 0 {
		return nil
	}
	s := &proxy.Status
	instance, replacement := replica.RefsIfAny(proxy, k)
	for _, ref := range []*v1alpha1.InstanceRef{instance, replacement} {
		for _, c := range candidates {
			if ref != nil && ref.Address != "" && ref.Address == c.Spec.Address {
				return c
			}
		}
	}
	for _, c := range candidates {
		if slices.Contains(s.Addresses, ipOf(c.Spec.Address)) {
			return c
		}
	}
	first := candidates[0]
	for _, c := range candidates[1:] {
		if c.Name < first.Name {
			first = c
		}
	}
	return first
}

// claimAddress creates the ProxyAddress of the pinned address, or of the
// first address of the pool no ProxyAddress of the provider entry in the
// cache holds, moving on when the API server says it is taken (the cache
// lags, or another replica got there first).
func (r *ProxyReconciler) claimAddress(ctx context.Context, proxy *v1alpha1.Proxy, pool *v1alpha1.AddressPool, pn addresses.Pool,
	mine []v1alpha1.ProxyAddress, pinned *netip.Addr, k int) (*v1alpha1.ProxyAddress, error) {
	taken, err := r.holders(ctx, pool.Spec.Provider)
	if err != nil {
		return nil, err
	}
	// The Proxy's own, read fresh: its other replicas' claims of this
	// reconcile are not in the cache yet.
	for _, t := range mine {
		if p, err := netip.ParsePrefix(t.Spec.Address); err == nil {
			taken[p.Addr()] = t.Name
		}
	}
	candidates := pn.Addrs
	if pinned != nil {
		if name, held := taken[*pinned]; held {
			return r.pinnedHeld(ctx, proxy, name, *pinned, k)
		}
		candidates = []netip.Addr{*pinned}
	} else {
		free := make([]netip.Addr, 0, len(candidates))
		for _, a := range candidates {
			if _, held := taken[a]; !held {
				free = append(free, a)
			}
		}
		candidates = free
	}
	for _, a := range candidates {
		obj := newProxyAddress(proxy, pool, pn, a, k)
		err := r.Create(ctx, obj)
		if err == nil {
			logf.FromContext(ctx).Info("allocated address", "pool", pool.Name, "address", obj.Spec.Address)
			return obj, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating ProxyAddress %s: %w", obj.Name, err)
		}
		if pinned != nil {
			return r.pinnedHeld(ctx, proxy, obj.Name, *pinned, k)
		}
	}
	if pinned != nil {
		return nil, r.addressWait(proxy, v1alpha1.ReasonAddressTaken, fmt.Sprintf("spec.addresses[%d]: %s is taken", k, *pinned))
	}
	return nil, r.addressWait(proxy, v1alpha1.ReasonPoolExhausted,
		fmt.Sprintf("AddressPool %s has no free address (%d addresses, all held); the Proxy waits until one is released", pool.Name, len(pn.Addrs)))
}

// holders maps each address the provider entry's ProxyAddresses in the
// cache hold, whichever pool they came from and however they are named,
// to one holder's name.
func (r *ProxyReconciler) holders(ctx context.Context, provider string) (map[netip.Addr]string, error) {
	var all v1alpha1.ProxyAddressList
	if err := r.List(ctx, &all); err != nil {
		return nil, fmt.Errorf("listing ProxyAddresses: %w", err)
	}
	out := map[netip.Addr]string{}
	for _, pa := range all.Items {
		if p, err := netip.ParsePrefix(pa.Spec.Address); err == nil && pa.Spec.Provider == provider {
			out[p.Addr()] = pa.Name
		}
	}
	return out, nil
}

// newProxyAddress is the allocation of a to the Proxy's replica k, with the
// pool's network copied: a later edit of the pool does not move a VM.
func newProxyAddress(proxy *v1alpha1.Proxy, pool *v1alpha1.AddressPool, pn addresses.Pool, a netip.Addr, k int) *v1alpha1.ProxyAddress {
	n := pn.Network(a)
	dns := make([]string, 0, len(n.DNS))
	for _, d := range n.DNS {
		dns = append(dns, d.String())
	}
	return &v1alpha1.ProxyAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name:   addresses.Name(pool.Spec.Provider, a),
			Labels: map[string]string{v1alpha1.LabelPool: pool.Name, v1alpha1.LabelProxyUID: string(proxy.UID)},
		},
		Spec: v1alpha1.ProxyAddressSpec{
			Pool: pool.Name, Provider: pool.Spec.Provider,
			Address: n.Address.String(), Gateway: n.Gateway.String(), DNS: dns, Replica: int32(k),
			Proxy: v1alpha1.ProxyRef{Namespace: proxy.Namespace, Name: proxy.Name, UID: string(proxy.UID)},
		},
	}
}

// releaseUnused deletes the Proxy's ProxyAddresses not named in keep whose
// address no instance in its status, of any replica, was made with: the
// address of a pool the Proxy left, or of a replica scaled away, is
// released once its VM is gone (a replacement deletes the old VM before
// the new one is made, and clears it from the status only then; a removed
// replica's entry is dropped only once its VMs are gone).
func (r *ProxyReconciler) releaseUnused(ctx context.Context, proxy *v1alpha1.Proxy, held []v1alpha1.ProxyAddress, keep map[string]bool) error {
	inUse := map[string]bool{}
	for _, ref := range replica.All(proxy) {
		if ref != nil && ref.Address != "" {
			inUse[ref.Address] = true
		}
	}
	var errs []error
	for i := range held {
		h := &held[i]
		if keep[h.Name] || inUse[h.Spec.Address] {
			continue
		}
		if err := r.release(ctx, proxy, h); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// releaseAll deletes every ProxyAddress of the Proxy: its VMs are gone.
func (r *ProxyReconciler) releaseAll(ctx context.Context, proxy *v1alpha1.Proxy) error {
	held, err := r.heldAddresses(ctx, proxy)
	if err != nil {
		return err
	}
	var errs []error
	for i := range held {
		if err := r.release(ctx, proxy, &held[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// release deletes one ProxyAddress, exactly the one read (its UID), so a
// new allocation of the same address is never deleted by mistake.
func (r *ProxyReconciler) release(ctx context.Context, proxy *v1alpha1.Proxy, pa *v1alpha1.ProxyAddress) error {
	uid := pa.UID
	err := r.Delete(ctx, pa, client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("releasing ProxyAddress %s: %w", pa.Name, err)
	}
	if err == nil {
		logf.FromContext(ctx).Info("released address", "pool", pa.Spec.Pool, "address", pa.Spec.Address)
		r.event(proxy, corev1.EventTypeNormal, "AddressReleased", "Release", fmt.Sprintf("released %s of AddressPool %s", pa.Spec.Address, pa.Spec.Pool))
	}
	return nil
}

// addressWait records why the Proxy has no address yet and returns it as
// a *waitAddress; the event is sent when the reason or message is new.
func (r *ProxyReconciler) addressWait(proxy *v1alpha1.Proxy, reason, msg string) error {
	return r.waitFor(proxy, reason, msg)
}

// waitFor is addressWait's *waitAddress.
func (r *ProxyReconciler) waitFor(proxy *v1alpha1.Proxy, reason, msg string) *waitAddress {
	// The condition joins every waiting replica's message.
	if c := meta.FindStatusCondition(proxy.Status.Conditions, v1alpha1.ConditionAddressesAllocated); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, msg) {
		r.event(proxy, corev1.EventTypeWarning, reason, "Allocate", msg)
	}
	replica.SetCondition(proxy, v1alpha1.ConditionAddressesAllocated, false, reason, msg)
	return &waitAddress{reason: reason, msg: msg}
}

// proxiesOfPool maps an object to the Proxies of the pool poolOf names.
func (r *ProxyReconciler) proxiesOfPool(poolOf func(client.Object) string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var list v1alpha1.ProxyList
		if err := r.List(ctx, &list, client.MatchingFields{indexAddressPool: poolOf(o)}); err != nil {
			logf.FromContext(ctx).Error(err, "listing the Proxies of a pool", "pool", poolOf(o))
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, p := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
		}
		return out
	}
}
