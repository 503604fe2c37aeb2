package controller

import (
	"context"
	"net/netip"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// AddressPoolReconciler keeps each AddressPool's status: how many
// addresses it hands out, how many are held, and whether its fields parse
// (Valid, naming the field and the value that does not). The counts feed
// kubectl's columns and the egressproxies_pool_addresses metric.
type AddressPoolReconciler struct {
	client.Client
}

// +kubebuilder:rbac:groups=egressproxies.io,resources=addresspools/status,verbs=get;update;patch

// SetupWithManager reconciles a pool on its own changes and on every
// allocation or release of one of its addresses.
func (r *AddressPoolReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.AddressPool{}).
		Watches(&v1alpha1.ProxyAddress{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.(*v1alpha1.ProxyAddress).Spec.Pool}}}
		})).
		Named("addresspool").
		Complete(r)
}

// Reconcile counts one pool's addresses.
func (r *AddressPoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pool v1alpha1.AddressPool
	if err := r.Get(ctx, req.NamespacedName, &pool); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var held v1alpha1.ProxyAddressList
	if err := r.List(ctx, &held, client.MatchingLabels{LabelPool: pool.Name}); err != nil {
		return ctrl.Result{}, err
	}
	status := pool.Status.DeepCopy()
	cond := metav1.Condition{Type: v1alpha1.ConditionValid, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonPoolValid,
		Message: "every field parses", ObservedGeneration: pool.Generation}
	pn, err := parsePool(&pool.Spec)
	if err != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonPoolInvalid, err.Error()
	}
	status.Total, status.Allocated = len(pn.addrs), len(held.Items)
	inPool := 0
	for _, h := range held.Items {
		if p, err := netip.ParsePrefix(h.Spec.Address); err == nil && pn.contains(p.Addr()) {
			inPool++
		}
	}
	// An address held outside the pool (the pool shrank under it) counts
	// as allocated, not against the free ones.
	status.Free = status.Total - inPool
	meta.SetStatusCondition(&status.Conditions, cond)
	if equality.Semantic.DeepEqual(*status, pool.Status) {
		return ctrl.Result{}, nil
	}
	pool.Status = *status
	return ctrl.Result{}, r.Status().Update(ctx, &pool)
}
