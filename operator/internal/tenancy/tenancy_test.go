package tenancy

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// A Proxy may use its entry and its pool when each one's selector, where
// set, matches its namespace's labels; a refusal names the entry or pool,
// the namespace and the selector, and a pool whose selector does not parse
// refuses every namespace, naming the field. A pool that does not exist is
// the allocator's to report.
func TestRefusalNamesWhatRefusedTheNamespace(t *testing.T) {
	payments := labels.SelectorFromSet(labels.Set{"team": "payments"})
	reader := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pay", Labels: map[string]string{"team": "payments"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}},
		&v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "open"}},
		&v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "paying"}, Spec: v1alpha1.AddressPoolSpec{
			AllowedNamespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "payments"}}}},
		&v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "broken"}, Spec: v1alpha1.AddressPoolSpec{
			AllowedNamespaces: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}}}},
	).Build()
	for _, c := range []struct {
		name, namespace, pool string
		entry                 labels.Selector
		want                  []string // in the message; none: allowed
	}{
		{"no selector anywhere", "web", "open", nil, nil},
		{"a missing pool", "web", "gone", nil, nil},
		{"the entry allows", "pay", "", payments, nil},
		{"the entry refuses", "web", "", payments, []string{`namespace "web"`, `provider entry "lab"`, `"team=payments"`}},
		{"the pool allows", "pay", "paying", nil, nil},
		{"the pool refuses", "web", "paying", nil, []string{`namespace "web"`, `AddressPool "paying"`, `"team=payments"`}},
		{"the entry allows, the pool refuses", "web", "paying", labels.Everything(), []string{`AddressPool "paying"`}},
		{"a pool selector that does not parse", "pay", "broken", nil, []string{`AddressPool "broken" spec.allowedNamespaces`, `"Near"`}},
	} {
		proxy := &v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: "p"}, Spec: v1alpha1.ProxySpec{AddressPool: c.pool}}
		reason, msg, err := Refusal(context.Background(), reader, proxy, &providers.Entry{Name: "lab", AllowedNamespaces: c.entry})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.want == nil {
			if reason != "" || msg != "" {
				t.Errorf("%s: refused (%s: %s), want allowed", c.name, reason, msg)
			}
			continue
		}
		if reason != v1alpha1.ReasonNamespaceNotAllowed {
			t.Errorf("%s: reason %q, want %s", c.name, reason, v1alpha1.ReasonNamespaceNotAllowed)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: message %q does not name %s", c.name, msg, w)
			}
		}
	}
}

// scheme holds Namespaces and the operator's API: all the test's fake client reads.
func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}
