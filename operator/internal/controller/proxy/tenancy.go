package proxy

import (
	"context"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Tenancy is decided by package tenancy; the reconciler watches the
// Namespaces, whose labels it reads.

// proxiesOfNamespace maps a Namespace whose labels changed to its
// Proxies: one may be allowed now, or no longer.
func (r *Reconciler) proxiesOfNamespace(ctx context.Context, ns client.Object) []reconcile.Request {
	return r.proxiesListed(ctx, "namespace", ns.GetName(), client.InNamespace(ns.GetName()))
}

// namespaceLabelsChanged passes a Namespace's label changes only: every
// Proxy reconciles at start, and a Namespace's deletion deletes its
// Proxies.
var namespaceLabelsChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !labels.Equals(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
	},
}
