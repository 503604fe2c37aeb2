package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/app"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/devsim"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/probe"
)

const (
	user     = "bench"
	password = "bench-password"
	// poll is how often both paths look for the guest's address.
	poll = 20 * time.Millisecond
	// workers is the bare path's concurrency: the operator's reconciles.
	workers = 3
)

var (
	sim   *devsim.Vcsim
	k8s   client.WithWatch
	front *httptest.Server
	calls atomic.Int64 // SOAP requests through the front: the paths' own
)

func TestMain(m *testing.M) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run hack/bench-vsphere.sh")
		os.Exit(1)
	}
	logf.SetLogger(logr.Discard())
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := run(m, cfg)
	_ = env.Stop()
	os.Exit(code)
}

func run(m *testing.M, cfg *rest.Config) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	sim, err = devsim.StartVcsim(ctx, user, password, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer sim.Stop()
	server := sim.Server
	backend := &url.URL{Scheme: server.URL.Scheme, Host: server.URL.Host}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(backend) }}
	front = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	go sim.PlayGuests(ctx, poll/2, nil)

	if k8s, err = client.NewWithWatch(cfg, client.Options{Scheme: app.NewScheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	configPath, standIn, err := operatorConfig(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(filepath.Dir(configPath)) }()
	go func() {
		err := app.Run(ctx, app.Options{ConfigPath: configPath, Registry: devsim.Registry(), MetricsAddr: "0", ProbeAddr: "0",
			RestConfig: func() (*rest.Config, error) { return cfg, nil },
			Prober:     probe.HTTPProxy{Dial: devsim.Dialer(standIn)},
			Timing:     controller.Timing{Poll: poll, Resync: time.Second},
		})
		if err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "operator:", err)
		}
	}()
	return m.Run()
}

// operatorConfig writes the providers config for the front and starts the
// stand-in proxy the probe reaches.
func operatorConfig(ctx context.Context) (string, net.Listener, error) {
	dir, err := os.MkdirTemp("", "bench-vsphere")
	if err != nil {
		return "", nil, err
	}
	cfg, err := devsim.WriteProvidersConfig(dir, devsim.Provider{
		Name: "bench", Server: front.URL + "/sdk", Cert: front.Certificate(), User: user, Password: password,
		Extra: "    checkInterval: 1h\n    limits: {qps: 1000, burst: 1000, concurrency: 16}\n",
	})
	if err != nil {
		return "", nil, err
	}
	l, err := devsim.StandInProxy(ctx)
	return cfg, l, err
}
