// Package addresspool reports each AddressPool's addresses, holders and
// overlaps in its status (docs/addresses.md).
package addresspool

import (
	"context"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/addresses"
)

// Reconciler keeps each AddressPool's status: how many
// addresses it hands out, how many are held, whether its fields parse and
// it overlaps no older pool of its provider entry (Valid, naming the field
// and the value, or both pools and the range), and whether any of its
// addresses is held twice (AddressesUnique). The counts feed kubectl's
// columns and the egressproxies_pool_addresses metric.
type Reconciler struct {
	client.Client
}

// +kubebuilder:rbac:groups=egressproxies.io,resources=addresspools/status,verbs=get;update;patch

// SetupWithManager reconciles a provider entry's pools on a change of any
// of them (an overlap involves two) and on every allocation or release of
// one of its addresses (a duplicate may involve another pool's).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.AddressPool{}).
		Watches(&v1alpha1.AddressPool{}, handler.EnqueueRequestsFromMapFunc(r.poolsOf(func(o client.Object) string {
			return o.(*v1alpha1.AddressPool).Spec.Provider
		}))).
		Watches(&v1alpha1.ProxyAddress{}, handler.EnqueueRequestsFromMapFunc(r.poolsOf(func(o client.Object) string {
			return o.(*v1alpha1.ProxyAddress).Spec.Provider
		}))).
		Named("addresspool").
		Complete(r)
}

// poolsOf maps an object to every pool of the provider entry providerOf
// names.
func (r *Reconciler) poolsOf(providerOf func(client.Object) string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var pools v1alpha1.AddressPoolList
		if err := r.List(ctx, &pools); err != nil {
			logf.FromContext(ctx).Error(err, "listing AddressPools")
			return nil
		}
		var out []reconcile.Request
		for _, p := range pools.Items {
			if p.Spec.Provider == providerOf(o) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: p.Name}})
			}
		}
		return out
	}
}

// Reconcile counts one pool's addresses and checks it against its
// provider entry's other pools and allocations.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pool v1alpha1.AddressPool
	if err := r.Get(ctx, req.NamespacedName, &pool); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var pools v1alpha1.AddressPoolList
	if err := r.List(ctx, &pools); err != nil {
		return ctrl.Result{}, err
	}
	var all v1alpha1.ProxyAddressList
	if err := r.List(ctx, &all); err != nil {
		return ctrl.Result{}, err
	}
	var entry, held []v1alpha1.ProxyAddress
	for _, pa := range all.Items {
		if pa.Spec.Provider == pool.Spec.Provider {
			entry = append(entry, pa)
		}
		if pa.Spec.Pool == pool.Name {
			held = append(held, pa)
		}
	}
	status := pool.Status.DeepCopy()
	valid := metav1.Condition{Type: v1alpha1.ConditionValid, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonPoolValid,
		Message: "every field parses, and no older pool of provider entry " + pool.Spec.Provider + " hands out its addresses", ObservedGeneration: pool.Generation}
	pn, err := addresses.Parse(&pool.Spec)
	if err != nil {
		valid.Status, valid.Reason, valid.Message = metav1.ConditionFalse, v1alpha1.ReasonPoolInvalid, err.Error()
	} else if o := addresses.OverlapOf(&pool, pn, pools.Items); o != nil {
		valid.Status, valid.Reason, valid.Message = metav1.ConditionFalse, v1alpha1.ReasonPoolOverlaps, o.Message(pool.Name, pool.Spec.Provider)
	}
	unique := metav1.Condition{Type: v1alpha1.ConditionAddressesUnique, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAddressesUnique,
		Message: "no address of the pool is held twice among provider entry " + pool.Spec.Provider + "'s ProxyAddresses", ObservedGeneration: pool.Generation}
	if dups := addresses.Duplicates(entry, pool.Name); len(dups) > 0 {
		unique.Status, unique.Reason = metav1.ConditionFalse, v1alpha1.ReasonDuplicateAddress
		unique.Message = strings.Join(dups, "; ") + ": two VMs may answer on each; the operator resolves none: delete one of the Proxies, or move it to another pool"
	}
	status.Total, status.Allocated = len(pn.Addrs), len(held)
	inPool := 0
	for _, h := range held {
		if p, err := netip.ParsePrefix(h.Spec.Address); err == nil && pn.Contains(p.Addr()) {
			inPool++
		}
	}
	// An address held outside the pool (the pool shrank under it) counts
	// as allocated, not against the free ones.
	status.Free = status.Total - inPool
	meta.SetStatusCondition(&status.Conditions, valid)
	meta.SetStatusCondition(&status.Conditions, unique)
	if equality.Semantic.DeepEqual(*status, pool.Status) {
		return ctrl.Result{}, nil
	}
	// A merge patch of the status from the pool as read, conditional on
	// its resourceVersion: a pool changed since is reconciled again.
	before := pool.DeepCopy()
	pool.Status = *status
	return ctrl.Result{}, r.Status().Patch(ctx, &pool, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}
