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
	"strconv"
	"strings"
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
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{Path("config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	if !hasDefaultRoute() {
		// kube-apiserver takes the address it advertises from the default
		// route, and a network namespace a lane made (the OpenStack one's)
		// has none, so it would not start. It advertises the loopback it
		// serves on instead, which cannot back the default/kubernetes
		// Service's endpoints (pkg/controlplane/instance.go refuses it):
		// their reconciler is off, and a test that reads them (binding's)
		// does not run there.
		flags := env.ControlPlane.GetAPIServer().Configure()
		flags.Set("advertise-address", "127.0.0.1")
		flags.Set("endpoint-reconciler-type", "none")
	}
	return env
}

// hasDefaultRoute says whether this network namespace has an IPv4 or IPv6
// default route (proc(5): /proc/net/route's destination 00000000,
// /proc/net/ipv6_route's all-zero destination of prefix length 00 whose
// flags say up and not reject: every namespace has an unreachable one).
func hasDefaultRoute() bool {
	v4, err4 := os.ReadFile("/proc/net/route")
	v6, err6 := os.ReadFile("/proc/net/ipv6_route")
	if err4 != nil && err6 != nil {
		return true // not Linux: leave the API server's own choice
	}
	return defaultRouteIn(string(v4), string(v6))
}

// defaultRouteIn is hasDefaultRoute on the two tables' contents.
func defaultRouteIn(v4, v6 string) bool {
	for _, line := range strings.Split(v4, "\n")[1:] {
		if f := strings.Fields(line); len(f) > 1 && f[1] == "00000000" {
			return true
		}
	}
	for _, line := range strings.Split(v6, "\n") {
		f := strings.Fields(line)
		if len(f) < 10 || f[0] != strings.Repeat("0", 32) || f[1] != "00" {
			continue
		}
		if flags, err := strconv.ParseUint(f[8], 16, 32); err == nil && flags&rtfUp != 0 && flags&rtfReject == 0 {
			return true
		}
	}
	return false
}

// Route flags of linux/route.h.
const (
	rtfUp     = 0x0001
	rtfReject = 0x0200
)

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
	EventuallyWithin(t, 20*time.Second, what, cond)
}

// EventuallyWithin is Eventually for up to d: for a real backend, whose
// builds and deletes take seconds each.
func EventuallyWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
