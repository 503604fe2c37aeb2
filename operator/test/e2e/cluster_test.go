//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/app"
)

// startCluster starts kube-apiserver and etcd (from KUBEBUILDER_ASSETS,
// as make dev does) with the CRDs installed, stopped at cleanup. It
// returns a client and the path of an admin kubeconfig for the operator.
func startCluster(t *testing.T, l lane) (client.Client, string) {
	t.Helper()
	env := &envtest.Environment{CRDDirectoryPaths: []string{l.CRDs}, ErrorIfCRDPathMissing: true}
	// The namespace has no default route, from which kube-apiserver would
	// otherwise pick the address it advertises; loopback is refused for
	// the kubernetes Service's endpoints, which nothing here uses.
	env.ControlPlane.GetAPIServer().Configure().
		Set("advertise-address", "127.0.0.1").
		Set("endpoint-reconciler-type", "none")
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("control plane: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	admin, err := env.AddUser(envtest.User{Name: "e2e-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(l.State, "kubeconfig")
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		t.Fatal(err)
	}
	k8s, err := client.New(cfg, client.Options{Scheme: app.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return k8s, kubeconfig
}
