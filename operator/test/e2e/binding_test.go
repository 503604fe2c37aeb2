//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// boundNamespace is the Namespace of the second Proxy, labelled to bind
// every Pod created in it to that Proxy (docs/egress.md, Binding
// workloads).
const boundNamespace = "e2e-bound"

// createBoundNamespace creates boundNamespace bound to Proxy proxy, and
// deletes it when the test ends.
func createBoundNamespace(ctx context.Context, t *testing.T, cs kubernetes.Interface, proxy string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: boundNamespace, Labels: map[string]string{v1alpha1.LabelEgressVia: proxy}}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the bound Namespace: %v", err)
	}
	cleanupCtx := context.WithoutCancel(ctx)
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(cleanupCtx, boundNamespace, metav1.DeleteOptions{}) })
}

// checkBinding proves the Pod webhook on the real node: a Pod of the bound
// Namespace, with no proxy setting of its own, is given p's Service as its
// proxy and reaches the origin from p's VM address; a Pod of an unbound
// Namespace is given nothing. Then, with the operator scaled to 0, a Pod of
// an unbound Namespace is still created and one of the bound Namespace is
// refused (failurePolicy Fail), as docs/egress.md says.
func checkBinding(t *testing.T, cs kubernetes.Interface, l lane, org *origin, p *v1alpha1.Proxy) {
	t.Helper()
	ctx := t.Context()
	wantProxy := fmt.Sprintf("HTTP_PROXY=http://%s.%s.svc.cluster.local:%d", p.Name, p.Namespace, p.Spec.Port)
	ok, out, _ := runClientPod(ctx, t, cs, l, p.Namespace, "client-bound", "env", org.URL+"/bound")
	if !ok || !strings.Contains(out, wantProxy) || !strings.Contains(out, "status: 200 OK") {
		t.Errorf("a Pod of the bound Namespace %s, with no proxy of its own: want %s and a 200:\n%s", p.Namespace, wantProxy, out)
	}
	if got := org.sources("/bound"); !slices.Equal(got, []string{p.Status.Address}) {
		t.Errorf("the origin saw the bound Pod's request from %v, want only from the VM %s", got, p.Status.Address)
	}
	_, out, _ = runClientPod(ctx, t, cs, l, "default", "client-unbound", "env", org.URL+"/unbound")
	if !strings.Contains(out, "HTTP_PROXY=\n") {
		t.Errorf("a Pod of the unbound Namespace default was given a proxy:\n%s", out)
	}

	kubectl(t, l, nil, "-n", installNamespace, "scale", "deployment/"+deployment, "--replicas=0")
	kubectl(t, l, nil, "-n", installNamespace, "wait", "--for=delete", "pod", "-l", operatorLabel, "--timeout=2m")
	unbound := clientPod(l, "default", "unbound-webhook-down", "through", "env", org.URL+"/down")
	if _, err := cs.CoreV1().Pods("default").Create(ctx, unbound, metav1.CreateOptions{}); err != nil {
		t.Errorf("with the operator down, a Pod of an unbound Namespace was refused: %v", err)
	} else {
		_ = cs.CoreV1().Pods("default").Delete(ctx, unbound.Name, metav1.DeleteOptions{})
	}
	bound := clientPod(l, p.Namespace, "bound-webhook-down", "through", "env", org.URL+"/down")
	_, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, bound, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Errorf("with the operator down, creating a Pod of the bound Namespace: %v; want it refused by the webhook's failure policy", err)
	}
	kubectl(t, l, nil, "-n", installNamespace, "scale", "deployment/"+deployment, "--replicas=2")
	kubectl(t, l, nil, "-n", installNamespace, "rollout", "status", "deployment/"+deployment, "--timeout=5m")
	t.Logf("Pod binding: the bound Pod went out through %s from %s; the unbound Pod got no proxy; with the operator down, bound Pods were refused (%v), others created",
		p.Name, p.Status.Address, err)
}
