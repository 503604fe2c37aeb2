package binding

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controllertest"
)

// The suite runs the Pod webhook against a real kube-apiserver and etcd
// (controllertest) with the shipped MutatingWebhookConfiguration
// installed (config/webhook/manifests.yaml; envtest points it at the
// test's server and signs that server's certificate): a test creates
// Namespaces, Proxies and Pods, and the API server calls the webhook as it
// would in a cluster, selectors and failure policy included.

var k8s client.Client

// domain is the cluster domain the suite's webhook is told.
const domain = "cluster.test"

func TestMain(m *testing.M) {
	env := controllertest.Environment()
	env.WebhookInstallOptions = envtest.WebhookInstallOptions{Paths: []string{controllertest.Path("config", "webhook", "manifests.yaml")}}
	controllertest.MainIn(m, env, func(m *testing.M, cfg *rest.Config) int { return run(m, cfg, env) })
}

func run(m *testing.M, cfg *rest.Config, env *envtest.Environment) int {
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
	wo := env.WebhookInstallOptions
	server := webhook.NewServer(webhook.Options{Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir})
	server.Register(Path, &webhook.Admission{Handler: &Binder{
		Reader: mgr.GetAPIReader(), Proxies: mgr.GetClient(), Domain: domain,
		Cluster: &Discovery{Reader: mgr.GetAPIReader(), Domain: domain, Networks: []string{"172.30.0.0/16"}, TTL: 1},
	}})
	if err := mgr.Add(server); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer controllertest.Start(mgr, func(err error) { fmt.Fprintln(os.Stderr, "manager:", err) })()
	return m.Run()
}
