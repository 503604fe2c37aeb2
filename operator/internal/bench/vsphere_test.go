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
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/app"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller/proxy"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controllertest"
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
	// received counts the bytes of the SOAP answers through the front,
	// conns the connections made to it (each a TLS handshake).
	received, conns atomic.Int64
	// restConfig reaches the API server; providersConfig is the
	// operator's config for the front.
	restConfig      *rest.Config
	providersConfig string
	// faultsConfig is the same with a short call timeout, for the runs
	// with faults.
	faultsConfig string
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(operatorProcess())
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run hack/bench-vsphere.sh or hack/bench-fleet.sh")
		os.Exit(1)
	}
	logf.SetLogger(logr.Discard())
	// controllertest's: it also starts in a network namespace with no
	// default route (hack/bench-fleet.sh with BENCH_SHIPPED=1).
	env := controllertest.Environment()
	// A fleet's Services need more ClusterIPs than envtest's /24 holds.
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.0.0.0/16")
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
	front = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if plan := injecting.Load(); plan != nil && plan.serve(w, r, proxy) {
			return
		}
		proxy.ServeHTTP(countingWriter{w}, r)
	}))
	front.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			conns.Add(1)
		}
	}
	front.StartTLS()
	defer front.Close()
	go sim.PlayGuests(ctx, poll/2, nil)

	restConfig = cfg
	if k8s, err = client.NewWithWatch(cfg, client.Options{Scheme: app.NewScheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "bench-vsphere")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if providersConfig, err = writeProvidersConfig(dir, ""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	faultsDir := filepath.Join(dir, "faults")
	if err := os.Mkdir(faultsDir, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if faultsConfig, err = writeProvidersConfig(faultsDir, fmt.Sprintf("      callTimeout: %s\n", faultCallTimeout)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// countingWriter adds the bytes of each SOAP answer to received.
type countingWriter struct{ http.ResponseWriter }

func (w countingWriter) Write(b []byte) (int, error) {
	received.Add(int64(len(b)))
	return w.ResponseWriter.Write(b)
}

// startInProcess runs the operator in this process, with the probe
// pointed at a stand-in proxy, until the returned stop is called.
func startInProcess(b *testing.B) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	standIn, err := devsim.StandInProxy(ctx)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := app.Run(ctx, app.Options{ConfigPath: providersConfig, Registry: devsim.Registry(), MetricsAddr: "0", ProbeAddr: "0",
			RestConfig: func() (*rest.Config, error) { return restConfig, nil },
			Prober:     probe.HTTPProxy{Dial: devsim.Dialer(standIn)},
			Timing:     proxy.Timing{Poll: poll, Resync: time.Second},
		})
		if err != nil && ctx.Err() == nil {
			b.Error("operator:", err)
		}
	}()
	return func() { cancel(); <-done }
}

// writeProvidersConfig writes the providers config for the front into
// dir, with vsphere added to its vsphere block.
func writeProvidersConfig(dir, vsphere string) (string, error) {
	return devsim.WriteProvidersConfig(dir, devsim.Provider{
		Name: "bench", Server: front.URL + "/sdk", Cert: front.Certificate(), User: user, Password: password,
		Extra:   "    checkInterval: 1h\n    limits: {qps: 1000, burst: 1000, concurrency: 16}\n",
		VSphere: vsphere,
	})
}
