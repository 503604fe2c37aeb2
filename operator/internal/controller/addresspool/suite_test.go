package addresspool

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controllertest"
)

// The suite runs the AddressPool reconciler alone in a manager against a
// real kube-apiserver and etcd (controllertest); a test writes the pools
// and the ProxyAddresses an allocation would, and reads the pools'
// status.

var k8s client.Client

func TestMain(m *testing.M) {
	controllertest.Main(m, run)
}

func run(m *testing.M, cfg *rest.Config) int {
	scheme := controllertest.Scheme()
	var err error
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := controllertest.NewManager(cfg, ctrl.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := (&Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer controllertest.Start(mgr, func(err error) { fmt.Fprintln(os.Stderr, "manager:", err) })()
	return m.Run()
}
