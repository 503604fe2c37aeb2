//go:build e2e

package e2e

import (
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/app"
)

// connect returns clients of the lane's node (hack/e2e/node-up.sh) as its
// admin: the test's identity, never the operator's, which runs under its
// own ServiceAccount with the generated RBAC only.
func connect(t *testing.T, l lane) (client.Client, kubernetes.Interface) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", l.Kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", l.Kubeconfig, err)
	}
	k8s, err := client.New(cfg, client.Options{Scheme: app.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return k8s, cs
}
