// Package controllertest starts the real kube-apiserver and etcd (envtest,
// built by hack/control-plane.sh) that each controller package's own
// suite runs against, with the operator's CRDs installed, and holds the
// helpers those suites share (docs/testing.md).
package controllertest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// Path joins elem to the operator module's directory, wherever the test
// runs from: config/crd/bases, config/samples.
func Path(elem ...string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(append([]string{filepath.Dir(file), "..", ".."}, elem...)...)
}

// Environment is a control plane with the operator's CRDs.
func Environment() *envtest.Environment {
	return &envtest.Environment{
		CRDDirectoryPaths:     []string{Path("config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
}

// Scheme holds Kubernetes' built-in types and the operator's API.
func Scheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// Main is a suite's TestMain: it starts a control plane, runs the suite
// through run (which calls m.Run), stops the control plane and exits with
// run's code. Without KUBEBUILDER_ASSETS it fails at once, saying how to
// set it.
func Main(m *testing.M, run func(m *testing.M, cfg *rest.Config) int) {
	MainIn(m, Environment(), run)
}

// MainIn is Main in env: Environment with more installed (a webhook
// configuration, say).
func MainIn(m *testing.M, env *envtest.Environment, run func(m *testing.M, cfg *rest.Config) int) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run through `make test/operator`, or export KUBEBUILDER_ASSETS=$(hack/control-plane.sh)")
		os.Exit(1)
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		os.Exit(1)
	}
	code := run(m, cfg)
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
	}
	os.Exit(code)
}

// Eventually polls cond every 50 ms for up to 20 s, and fails the test
// naming what it waited for.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
