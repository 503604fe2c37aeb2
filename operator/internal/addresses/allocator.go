package addresses

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
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// Static addresses (docs/md). A Proxy with spec.addressPool
// holds one ProxyAddress per replica; creating it is the allocation. Its
// name is the provider entry's and the address's, so the API server lets
// only one Proxy hold an address, whichever pool of the entry it comes
// from, across operator replicas and restarts, with no lock: a Create that
// meets AlreadyExists moves to the next address. A ProxyAddress is deleted
// only once no VM holds its address: when the Proxy's deletion has seen
// its VMs gone, or, for an address the Proxy no longer wants, when no
// instance in its status was made with it.

// Allocator holds each Proxy's static addresses as ProxyAddresses: it
// claims, keeps and releases them, and records on the Proxy why one waits
// (its AddressesAllocated condition and events).
type Allocator struct {
	// Client reads pools and the entry's ProxyAddresses from the cache,
	// and creates and deletes ProxyAddresses.
	Client client.Client
	// APIReader reads the Proxy's own ProxyAddresses and a pinned
	// address's holder from the API server, ahead of the cache.
	APIReader client.Reader
	// Recorder records events on the Proxy; nil records none.
	Recorder recorder.EventRecorder
}

// event records an event on the Proxy.
func (al *Allocator) event(proxy *v1alpha1.Proxy, eventType, reason, action, note string) {
	if al.Recorder != nil {
		al.Recorder.Eventf(proxy, nil, eventType, reason, action, "%s", note)
	}
}

// Wait says why a Proxy, or one of its replicas, has no address yet.
type Wait struct {
	Reason, Msg string
}

func (w *Wait) Error() string { return w.Msg }

// Allocate makes sure each of the Proxy's replicas holds its static
// address and returns the networks its VMs are made with, by replica
// index: nil for a Proxy without a pool. An error that is a *Wait
// holds the whole Proxy (its pool is missing or invalid); waits[k] says
// why replica k alone has no address yet (the pool is exhausted, its
// pinned address is taken). The Proxy's own ProxyAddresses are read from
// the API server, not the cache: one made by the last reconcile is found
// even before the cache has it, and never allocated twice.
func (al *Allocator) Allocate(ctx context.Context, proxy *v1alpha1.Proxy) (networks []*contract.StaticNetwork, waits []*Wait, err error) {
	n := replica.Desired(proxy)
	networks, waits = make([]*contract.StaticNetwork, n), make([]*Wait, n)
	poolName := proxy.Spec.AddressPool
	if poolName == "" {
		if !mayHoldAddresses(proxy) {
			// Never had a pool, or everything released: no read at all.
			return networks, waits, nil
		}
		held, err := al.heldAddresses(ctx, proxy)
		if err != nil {
			return nil, nil, err
		}
		if err := al.releaseUnused(ctx, proxy, held, nil); err != nil {
			return nil, nil, err
		}
		if len(held) == 0 || !anyInstanceAddress(proxy) {
			proxy.Status.Addresses = nil
			meta.RemoveStatusCondition(&proxy.Status.Conditions, v1alpha1.ConditionAddressesAllocated)
		}
		return networks, waits, nil
	}
	held, err := al.heldAddresses(ctx, proxy)
	if err != nil {
		return nil, nil, err
	}
	pool, pn, err := al.usablePool(ctx, proxy)
	if err != nil {
		return nil, nil, err
	}
	keep := map[string]bool{}
	var ips []string
	var firstWait *Wait
	for k := range n {
		mine, err := al.allocateReplica(ctx, proxy, pool, pn, held, k)
		if w := (*Wait)(nil); errors.As(err, &w) {
			waits[k] = w
			firstWait = cmp.Or(firstWait, w)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		network, err := NetworkOf(mine)
		if err != nil {
			w := al.waitFor(proxy, v1alpha1.ReasonPoolInvalid, fmt.Sprintf("ProxyAddress %s: %v", mine.Name, err))
			waits[k], firstWait = w, cmp.Or(firstWait, w)
			continue
		}
		keep[mine.Name] = true
		networks[k] = &network
		ips = append(ips, network.IP())
	}
	if err := al.releaseUnused(ctx, proxy, held, keep); err != nil {
		return nil, nil, err
	}
	proxy.Status.Addresses = ips
	if firstWait != nil {
		// Every waiting replica's message, under the first one's reason.
		var msgs []string
		for _, w := range waits {
			if w != nil && !slices.Contains(msgs, w.Msg) {
				msgs = append(msgs, w.Msg)
			}
		}
		replica.SetCondition(proxy, v1alpha1.ConditionAddressesAllocated, false, firstWait.Reason, strings.Join(msgs, "; "))
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
func (al *Allocator) heldAddresses(ctx context.Context, proxy *v1alpha1.Proxy) ([]v1alpha1.ProxyAddress, error) {
	var list v1alpha1.ProxyAddressList
	if err := al.APIReader.List(ctx, &list, client.MatchingLabels{v1alpha1.LabelProxyUID: string(proxy.UID)}); err != nil {
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
		if slices.Contains(s.Addresses, IPOf(c.Spec.Address)) {
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
func (al *Allocator) claimAddress(ctx context.Context, proxy *v1alpha1.Proxy, pool *v1alpha1.AddressPool, pn Pool,
	mine []v1alpha1.ProxyAddress, pinned *netip.Addr, k int) (*v1alpha1.ProxyAddress, error) {
	taken, err := al.Holders(ctx, pool.Spec.Provider)
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
			return al.pinnedHeld(ctx, proxy, name, *pinned, k)
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
		err := al.Client.Create(ctx, obj)
		if err == nil {
			logf.FromContext(ctx).Info("allocated address", "pool", pool.Name, "address", obj.Spec.Address)
			return obj, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating ProxyAddress %s: %w", obj.Name, err)
		}
		if pinned != nil {
			return al.pinnedHeld(ctx, proxy, obj.Name, *pinned, k)
		}
	}
	if pinned != nil {
		return nil, al.addressWait(proxy, v1alpha1.ReasonAddressTaken, fmt.Sprintf("spec.addresses[%d]: %s is taken", k, *pinned))
	}
	return nil, al.addressWait(proxy, v1alpha1.ReasonPoolExhausted,
		fmt.Sprintf("AddressPool %s has no free address (%d addresses, all held); the Proxy waits until one is released", pool.Name, len(pn.Addrs)))
}

// Holders maps each address the provider entry's ProxyAddresses in the
// cache hold, whichever pool they came from and however they are named,
// to one holder's name.
func (al *Allocator) Holders(ctx context.Context, provider string) (map[netip.Addr]string, error) {
	var all v1alpha1.ProxyAddressList
	if err := al.Client.List(ctx, &all); err != nil {
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
func newProxyAddress(proxy *v1alpha1.Proxy, pool *v1alpha1.AddressPool, pn Pool, a netip.Addr, k int) *v1alpha1.ProxyAddress {
	n := pn.Network(a)
	dns := make([]string, 0, len(n.DNS))
	for _, d := range n.DNS {
		dns = append(dns, d.String())
	}
	return &v1alpha1.ProxyAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name:   Name(pool.Spec.Provider, a),
			Labels: map[string]string{v1alpha1.LabelPool: pool.Name, v1alpha1.LabelProxyUID: string(proxy.UID)},
		},
		Spec: v1alpha1.ProxyAddressSpec{
			Pool: pool.Name, Provider: pool.Spec.Provider,
			Address: n.Address.String(), Gateway: n.Gateway.String(), DNS: dns, Replica: int32(k),
			Proxy: v1alpha1.ProxyRef{Namespace: proxy.Namespace, Name: proxy.Name, UID: string(proxy.UID)},
		},
	}
}

// addressWait records why the Proxy has no address yet and returns it as
// a *Wait; the event is sent when the reason or message is new.
func (al *Allocator) addressWait(proxy *v1alpha1.Proxy, reason, msg string) error {
	return al.waitFor(proxy, reason, msg)
}

// waitFor is addressWait's *Wait.
func (al *Allocator) waitFor(proxy *v1alpha1.Proxy, reason, msg string) *Wait {
	// The condition joins every waiting replica's message.
	if c := meta.FindStatusCondition(proxy.Status.Conditions, v1alpha1.ConditionAddressesAllocated); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, msg) {
		al.event(proxy, corev1.EventTypeWarning, reason, "Allocate", msg)
	}
	replica.SetCondition(proxy, v1alpha1.ConditionAddressesAllocated, false, reason, msg)
	return &Wait{Reason: reason, Msg: msg}
}
