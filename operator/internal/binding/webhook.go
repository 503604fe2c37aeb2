// Package binding binds workloads to a Proxy: a mutating admission webhook
// sets the proxy variables on the Pods of a Namespace, or the Pods,
// labelled v1alpha1.LabelEgressVia, with a NO_PROXY that keeps the
// cluster's own traffic off the proxy (docs/egress.md, Binding workloads).
package binding

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// Path is where the webhook server serves the Pod webhook; the
// MutatingWebhookConfiguration (config/webhook) names it.
const Path = "/mutate-v1-pod-egress-via"

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get

// Binder is the Pod webhook.
type Binder struct {
	// Reader reads the Pod's Namespace (uncached: the operator does not
	// watch Namespaces).
	Reader client.Reader
	// Proxies reads the bound Proxy (the manager's cache, which holds them).
	Proxies client.Reader
	// Domain is the cluster's DNS domain, for the Proxy's Service name.
	Domain string
	// Cluster gives the cluster's networks for NO_PROXY.
	Cluster interface {
		Cluster(ctx context.Context) (Cluster, error)
	}
}

var _ admission.Handler = (*Binder)(nil)

// Handle sets the proxy variables on a Pod created in a bound Namespace or
// carrying the label itself. A binding that names no Proxy of the Pod's
// namespace, or a bad no-proxy annotation, refuses the Pod with the label
// or annotation and its value: a Pod started without its proxy would go
// out from the node's address, which the destination does not allow.
func (b *Binder) Handle(ctx context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the Pod: %w", err))
	}
	ns := &corev1.Namespace{}
	if err := b.Reader.Get(ctx, client.ObjectKey{Name: req.Namespace}, ns); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("reading Namespace %s: %w", req.Namespace, err))
	}
	name, from := pod.Labels[v1alpha1.LabelEgressVia], "Pod"
	if name == "" {
		name, from = ns.Labels[v1alpha1.LabelEgressVia], "Namespace "+ns.Name
	}
	if name == "" {
		// The webhook's selectors sent a Pod neither binds.
		return admission.Allowed("not bound to a Proxy")
	}
	if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
		return admission.Denied(fmt.Sprintf("label %s=%q on %s: not a Proxy name: %s", v1alpha1.LabelEgressVia, name, from, errs[0]))
	}
	proxy := &v1alpha1.Proxy{}
	switch err := b.Proxies.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: name}, proxy); {
	case apierrors.IsNotFound(err):
		return admission.Denied(fmt.Sprintf("label %s=%q on %s: no Proxy %q in namespace %s to send the Pod's egress through",
			v1alpha1.LabelEgressVia, name, from, name, req.Namespace))
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("reading Proxy %s/%s: %w", req.Namespace, name, err))
	}
	var extra []string
	for _, src := range []struct {
		what        string
		annotations map[string]string
	}{{"Namespace " + ns.Name, ns.Annotations}, {"Pod", pod.Annotations}} {
		v, ok := src.annotations[v1alpha1.AnnotationNoProxy]
		if !ok {
			continue
		}
		entries, err := ParseNoProxy(v)
		if err != nil {
			return admission.Denied(fmt.Sprintf("annotation %s=%q on %s: %v", v1alpha1.AnnotationNoProxy, v, src.what, err))
		}
		extra = append(extra, entries...)
	}
	cluster, err := b.Cluster.Cluster(ctx)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	env := Env{ProxyURL: ProxyURL(proxy, b.Domain), NoProxy: NoProxy(cluster, extra)}
	if !Inject(pod, env) {
		return admission.Allowed("the Pod sets the proxy variables itself")
	}
	logf.FromContext(ctx).V(1).Info("bound a Pod to its Proxy", "namespace", req.Namespace, "proxy", name, "boundBy", from)
	mutated, err := json.Marshal(pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, mutated)
}

// ProxyURL is the URL of proxy's Service, which the operator keeps
// pointed at the replicas that answer (internal/endpoints). The name is
// fully qualified: it resolves without the Pod's DNS search list.
func ProxyURL(proxy *v1alpha1.Proxy, domain string) string {
	return fmt.Sprintf("http://%s.%s.svc.%s:%d", proxy.Name, proxy.Namespace, domain, proxy.Spec.Port)
}
