package release

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// arg is the value of the operator's --name flag, or "".
func arg(dep []string, name string) string {
	for _, a := range dep {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// The Pod webhook's flags name the objects the install ships: the Secret
// it writes its certificate to is the one mounted at its cert directory
// and the one its Role lets it update, the Service's certificate name
// reaches the webhook port, and the configuration whose CA it injects is
// the one that calls that Service. One name off, and Pod creation in every
// bound Namespace fails.
func TestPodWebhookFlagsNameTheShippedObjects(t *testing.T) {
	objs := render(t)
	dep := deployment(t, objs)
	c := dep.Spec.Template.Spec.Containers[0]
	secret, service, config := arg(c.Args, "webhook-secret"), arg(c.Args, "webhook-service"), arg(c.Args, "webhook-configuration")

	named(t, objs, "Secret", secret, &corev1.Secret{})
	certDir := arg(c.Args, "webhook-cert-dir")
	if certDir == "" {
		certDir = "/var/run/egress-proxies/webhook-certs" // the flag's default
	}
	if v := volumeMountedAt(dep, certDir); v == nil || v.EmptyDir == nil {
		t.Errorf("the webhook's cert directory %s is not a writable emptyDir (the operator copies the certificate there): %+v", certDir, v)
	}
	role := &rbacv1.Role{}
	named(t, objs, "Role", "egress-proxies-webhook-cert-role", role)
	if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Verbs, "update") && slices.Contains(r.ResourceNames, secret)
	}) {
		t.Errorf("the webhook's Role does not let it update Secret %s: %+v", secret, role.Rules)
	}

	svc := &corev1.Service{}
	named(t, objs, "Service", service, svc)
	if svc.Namespace != dep.Namespace || !selects(t, &metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, dep.Spec.Template.Labels) {
		t.Errorf("the webhook Service %s/%s does not select the operator's Pods", svc.Namespace, svc.Name)
	}
	port := arg(c.Args, "webhook-port")
	for _, p := range svc.Spec.Ports {
		i := slices.IndexFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == p.TargetPort.String() })
		if i < 0 || fmt.Sprint(c.Ports[i].ContainerPort) != port {
			t.Errorf("the webhook Service's port %s targets %s; --webhook-port is %s", p.Name, p.TargetPort.String(), port)
		}
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
	}) {
		t.Error("the operator's container lacks POD_NAMESPACE, the default of --webhook-namespace")
	}

	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	named(t, objs, "MutatingWebhookConfiguration", config, mwc)
	for _, w := range mwc.Webhooks {
		ref := w.ClientConfig.Service
		if ref == nil || ref.Name != service || ref.Namespace != dep.Namespace {
			t.Errorf("webhook %s calls %+v, not Service %s/%s", w.Name, ref, dep.Namespace, service)
		}
		if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Fail {
			t.Errorf("webhook %s: failurePolicy %v, want Fail (docs/egress.md)", w.Name, w.FailurePolicy)
		}
		excluded := false
		for _, e := range w.NamespaceSelector.MatchExpressions {
			if e.Key == corev1.LabelMetadataName && e.Operator == metav1.LabelSelectorOpNotIn {
				excluded = slices.Contains(e.Values, "kube-system") && slices.Contains(e.Values, dep.Namespace)
			}
		}
		if !excluded {
			t.Errorf("webhook %s may be called for Pods of kube-system or %s: a down operator would block them", w.Name, dep.Namespace)
		}
	}
}
