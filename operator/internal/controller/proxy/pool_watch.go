package proxy

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// indexAddressPool indexes Proxies by spec.addressPool, so a freed address
// or a new pool wakes the Proxies waiting on that pool.
const indexAddressPool = "spec.addressPool"

// addressPoolOf is the index's value for a Proxy: its pool, if it has one.
func addressPoolOf(o client.Object) []string {
	if pool := o.(*v1alpha1.Proxy).Spec.AddressPool; pool != "" {
		return []string{pool}
	}
	return nil
}

// proxiesOfPool maps an object to the Proxies of the pool poolOf names.
func (r *Reconciler) proxiesOfPool(poolOf func(client.Object) string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		return r.proxiesListed(ctx, "pool", poolOf(o), client.MatchingFields{indexAddressPool: poolOf(o)})
	}
}

// proxiesListed is a request for each Proxy the list options select; a
// failed list is logged, naming what the Proxies were listed for (kind
// and name), and wakes none.
func (r *Reconciler) proxiesListed(ctx context.Context, kind, name string, opts ...client.ListOption) []reconcile.Request {
	var list v1alpha1.ProxyList
	if err := r.List(ctx, &list, opts...); err != nil {
		logf.FromContext(ctx).Error(err, "listing the Proxies of a "+kind, kind, name)
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, p := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
	}
	return out
}
