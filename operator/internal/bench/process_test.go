package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/app"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/devsim"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/probe"
)

// The fleet benchmark runs the operator as a process of its own, so its
// memory is its own: this test binary again, in operator mode, running
// app.Run as cmd/main.go does, with the probe pointed at a stand-in proxy
// on loopback (the played guests' addresses are never contacted).
const (
	childEnv       = "BENCH_OPERATOR"         // set: be the operator
	childProviders = "BENCH_PROVIDERS_CONFIG" // its providers config
	childMetrics   = "BENCH_METRICS_ADDR"     // plain-HTTP metrics endpoint
	childHealth    = "BENCH_HEALTH_ADDR"      // /readyz
	childResync    = "BENCH_RESYNC"           // the Ready resync period
)

// operatorProcess is the operator mode: it runs until SIGTERM.
func operatorProcess() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	resync, err := time.ParseDuration(os.Getenv(childResync))
	if err != nil {
		fmt.Fprintln(os.Stderr, childResync, err)
		return 1
	}
	standIn, err := devsim.StandInProxy(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = app.Run(ctx, app.Options{
		ConfigPath: os.Getenv(childProviders), Registry: devsim.Registry(),
		MetricsAddr: os.Getenv(childMetrics), ProbeAddr: os.Getenv(childHealth),
		RestConfig: ctrl.GetConfig, // as cmd/main.go: KUBECONFIG, and its client-side rate limits
		Prober:     probe.HTTPProxy{Dial: devsim.Dialer(standIn)},
		Timing:     controller.Timing{Poll: poll, Resync: resync},
	})
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "operator:", err)
		return 1
	}
	return 0
}

// child is an operator process started by startChild.
type child struct {
	cmd     *exec.Cmd
	metrics string
}

// startChild starts the operator process and waits until it is ready.
func startChild(b *testing.B, resync time.Duration) *child {
	b.Helper()
	dir := b.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig); err != nil {
		b.Fatal(err)
	}
	c := &child{metrics: freeAddr(b)}
	health := freeAddr(b)
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), childEnv+"=1", "KUBECONFIG="+kubeconfig, childProviders+"="+providersConfig,
		childMetrics+"="+c.metrics, childHealth+"="+health, childResync+"="+resync.String())
	c.cmd.Stdout, c.cmd.Stderr = os.Stderr, os.Stderr
	if err := c.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://" + health + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c
			}
		}
		if time.Now().After(deadline) {
			c.stop()
			b.Fatalf("the operator process was not ready within a minute: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends the process and waits for it.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	_ = c.cmd.Wait()
}

// peakRSS is the process's resident set's high-water mark (VmHWM), in MiB.
func (c *child) peakRSS(b *testing.B) float64 {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" {
			kib, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				b.Fatal(err)
			}
			return kib / 1024
		}
	}
	b.Fatal("no VmHWM in /proc/pid/status")
	return 0
}

// apiRequests sums the operator's requests to the API server whose method
// is in methods (all, if none), from client-go's rest_client_requests_total.
func (c *child) apiRequests(b *testing.B, methods ...string) float64 {
	b.Helper()
	resp, err := http.Get("http://" + c.metrics + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	total := 0.0
	for _, m := range families["rest_client_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "method" && (len(methods) == 0 || slices.Contains(methods, l.GetValue())) {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// writeKubeconfig writes a kubeconfig for the envtest API server.
func writeKubeconfig(path string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: restConfig.Host, CertificateAuthorityData: restConfig.CAData}
	cfg.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: restConfig.CertData, ClientKeyData: restConfig.KeyData,
		Token: restConfig.BearerToken}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	cfg.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*cfg, path)
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}
