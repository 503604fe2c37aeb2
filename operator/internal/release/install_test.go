package release

import (
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// A real API server takes every object of the release manifests in the
// order they come, as `kubectl apply --server-side -f dist/install.yaml`
// sends them (the CRDs' schemas and CEL rules, the PodDisruptionBudget,
// the RBAC), and then the chart's, installed in another namespace over
// them.
func TestAPIServerAcceptsTheInstall(t *testing.T) {
	c := startAPIServer(t)
	apply := func(what string, objs []*unstructured.Unstructured) {
		t.Helper()
		for _, o := range objs {
			if err := c.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
				t.Errorf("%s: %s: %v", what, key(o), err)
			}
		}
	}
	objs := render(t)
	apply("release manifests", objs)
	// The Pods too: the Priority admission plugin resolves the
	// Deployment's priorityClassName (system-cluster-critical) outside
	// kube-system, and the Pod's own validation runs. envtest runs no
	// controller-manager, so the test makes the Pod the ReplicaSet would.
	dep := deployment(t, objs)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: dep.Namespace, Name: dep.Name + "-0", Labels: dep.Spec.Template.Labels},
		Spec: dep.Spec.Template.Spec}
	if err := c.Create(t.Context(), pod); err != nil {
		t.Errorf("the install's Pod: %v", err)
	} else if pod.Spec.Priority == nil || *pod.Spec.Priority < 1e9 {
		t.Errorf("the install's Pod has priority %v; want system-cluster-critical's (2000000000)", pod.Spec.Priority)
	}

	const ns = "operators"
	if err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	apply("chart", helmTemplate(t, ns))
}

// startAPIServer starts a bare kube-apiserver and etcd (envtest, nothing
// installed) for the test and returns a client of it.
func startAPIServer(t *testing.T) client.Client {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run through `make test/operator`, or export KUBEBUILDER_ASSETS=$(hack/control-plane.sh)")
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
