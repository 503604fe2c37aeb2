package proxy

import (
	"context"
	"errors"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controllertest"
)

// A pool's change wakes exactly the Proxies on that pool — not those of
// another pool, nor those without one — and a failed list wakes none.
func TestPoolChangeWakesItsProxies(t *testing.T) {
	onPool := func(name, pool string) client.Object {
		return &v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: v1alpha1.ProxySpec{AddressPool: pool}}
	}
	objs := []client.Object{onPool("a", "egress"), onPool("b", "egress"), onPool("c", "other"), onPool("d", "")}
	pool := &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "egress"}}

	k8s := fake.NewClientBuilder().WithScheme(controllertest.Scheme()).WithObjects(objs...).
		WithIndex(&v1alpha1.Proxy{}, indexAddressPool, addressPoolOf).Build()
	r := &Reconciler{Client: k8s}
	var woken []string
	for _, req := range r.proxiesOfPool(client.Object.GetName)(context.Background(), pool) {
		woken = append(woken, req.Name)
	}
	slices.Sort(woken)
	if !slices.Equal(woken, []string{"a", "b"}) {
		t.Errorf("woken %v, want [a b]", woken)
	}

	failing := fake.NewClientBuilder().WithScheme(controllertest.Scheme()).WithObjects(objs...).
		WithIndex(&v1alpha1.Proxy{}, indexAddressPool, addressPoolOf).
		WithInterceptorFuncs(interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("the API server is away")
		}}).Build()
	r = &Reconciler{Client: failing}
	if got := r.proxiesOfPool(client.Object.GetName)(context.Background(), pool); got != nil {
		t.Errorf("after a failed list woken %v, want none", got)
	}
}
