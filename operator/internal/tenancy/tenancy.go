// Package tenancy answers which namespaces' Proxies may use a provider
// entry (the config's allowedNamespaces) and an AddressPool
// (spec.allowedNamespaces), by namespace labels, as CAPV's identities do
// with allowedNamespaces (docs/operator.md, "Tenancy").
package tenancy

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// Refusal says why the Proxy's namespace may not use its provider
// entry or its AddressPool, as a reason and a message naming the entry or
// pool, the namespace and the selector; "" when it may. It makes no
// backend call, and reads the Namespace (from the cache) only when a
// selector is set. A missing pool is left to the allocator, which says so.
func Refusal(ctx context.Context, reader client.Reader, proxy *v1alpha1.Proxy, entry *providers.Entry) (reason, msg string, err error) {
	type rule struct {
		user     string
		selector labels.Selector
	}
	var rules []rule
	if entry.AllowedNamespaces != nil {
		rules = append(rules, rule{fmt.Sprintf("provider entry %q", entry.Name), entry.AllowedNamespaces})
	}
	if name := proxy.Spec.AddressPool; name != "" {
		var pool v1alpha1.AddressPool
		switch err := reader.Get(ctx, client.ObjectKey{Name: name}, &pool); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return "", "", err
		case pool.Spec.AllowedNamespaces != nil:
			selector, err := metav1.LabelSelectorAsSelector(pool.Spec.AllowedNamespaces)
			if err != nil {
				return v1alpha1.ReasonNamespaceNotAllowed, fmt.Sprintf("AddressPool %q spec.allowedNamespaces: %v: no namespace may use the pool until it is fixed", name, err), nil
			}
			rules = append(rules, rule{fmt.Sprintf("AddressPool %q", name), selector})
		}
	}
	if len(rules) == 0 {
		return "", "", nil
	}
	var ns corev1.Namespace
	if err := reader.Get(ctx, client.ObjectKey{Name: proxy.Namespace}, &ns); err != nil {
		return "", "", err
	}
	for _, rule := range rules {
		if !rule.selector.Matches(labels.Set(ns.Labels)) {
			return v1alpha1.ReasonNamespaceNotAllowed, fmt.Sprintf("namespace %q may not use %s: its allowedNamespaces selects namespaces labelled %q; label the namespace, or ask the operator's administrator", proxy.Namespace, rule.user, rule.selector.String()), nil
		}
	}
	return "", "", nil
}
