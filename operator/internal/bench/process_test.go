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
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/app"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller/proxy"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/devsim"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metricstest"
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
	// childWorkers, when set, is its --max-concurrent-reconciles.
	childWorkers = "BENCH_WORKERS"
	// childQuotaBackoff, when set, is its wait after a quota error (the
	// default, 5 min, would make a run with quota faults time the wait).
	childQuotaBackoff = "BENCH_QUOTA_BACKOFF"
	// childHeapProfile, when set, is where the operator process writes
	// its heap profile on SIGUSR1 (go tool pprof reads it): the fleet
	// benchmark asks for it once the fleet is Ready.
	childHeapProfile = "BENCH_HEAP_PROFILE"
	// childCPUProfile, when set, is where the operator process writes its
	// CPU profile from its start until the fleet is Ready (the same
	// SIGUSR1), so that it shows where creating the fleet spends the
	// operator's CPU.
	childCPUProfile = "BENCH_CPU_PROFILE"
	// operatorMemLimit, when set, is the operator process's GOMEMLIMIT
	// (and only its: vcsim in this process keeps the default).
	operatorMemLimit = "BENCH_OPERATOR_GOMEMLIMIT"
	// childLog, when set, is the file the operator process appends its
	// log to (JSON lines); unset, it logs nothing.
	childLog = "BENCH_OPERATOR_LOG"
	// shippedBinary, when set, is an operator binary built as the image
	// builds it (hack/bench-fleet.sh with BENCH_SHIPPED=1): the process
	// runs it at its defaults instead of this binary's operator mode. Its
	// probe dials the played guests' addresses for real, which the
	// script's network namespace routes to loopback (shippedStandIn).
	shippedBinary = "BENCH_OPERATOR_BINARY"
)

// shipped is the shipped binary the benchmark runs, or "".
func shipped() string { return os.Getenv(shippedBinary) }

// shippedStandIn is the stand-in proxy the shipped binary's probe reaches:
// it listens on every address of the network namespace, port port, once
// the played guests' first address (devsim.PlayGuests) is known to be
// local there, so that nothing listens beyond loopback.
func shippedStandIn(b testing.TB, port int) {
	b.Helper()
	guest := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 10)}
	probe, err := (&net.ListenConfig{}).Listen(b.Context(), "tcp", guest.String())
	if err != nil {
		b.Fatalf("%s: the played guests' addresses are not local here (%v); run through hack/bench-fleet.sh with BENCH_SHIPPED=1, "+
			"whose network namespace routes them to loopback", shippedBinary, err)
	}
	_ = probe.Close()
	l, err := devsim.StandInProxyAt(context.Background(), fmt.Sprintf(":%d", port))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
}

// operatorProcess is the operator mode: it runs until SIGTERM.
func operatorProcess() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if path := os.Getenv(childLog); path == "" {
		ctrl.SetLogger(logr.Discard())
	} else {
		// Appended to by every process of a chaos run, one after another.
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer func() { _ = f.Close() }()
		ctrl.SetLogger(zap.New(zap.WriteTo(f), zap.UseDevMode(false)))
	}
	heap, cpu := os.Getenv(childHeapProfile), os.Getenv(childCPUProfile)
	stopCPU := func() {}
	if cpu != "" {
		var err error
		if stopCPU, err = startCPUProfile(cpu); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer stopCPU()
	}
	if heap != "" || cpu != "" {
		asked := make(chan os.Signal, 1)
		signal.Notify(asked, syscall.SIGUSR1)
		go func() {
			for range asked {
				stopCPU()
				if heap != "" {
					writeHeapProfile(heap)
				}
			}
		}()
	}
	if path := os.Getenv(childGoroutines); path != "" {
		writeGoroutinesOnSignal(path)
	}
	resync, err := time.ParseDuration(os.Getenv(childResync))
	if err != nil {
		fmt.Fprintln(os.Stderr, childResync, err)
		return 1
	}
	var bounds proxy.Bounds
	if w := os.Getenv(childWorkers); w != "" {
		if bounds.Workers, err = strconv.Atoi(w); err != nil {
			fmt.Fprintln(os.Stderr, childWorkers, err)
			return 1
		}
	}
	timing := proxy.Timing{Poll: poll, Resync: resync}
	if q := os.Getenv(childQuotaBackoff); q != "" {
		if timing.QuotaBackoff, err = time.ParseDuration(q); err != nil {
			fmt.Fprintln(os.Stderr, childQuotaBackoff, err)
			return 1
		}
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
		Timing:     timing,
		Bounds:     bounds,
	})
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "operator:", err)
		return 1
	}
	return 0
}

// writeHeapProfile collects garbage and writes the heap profile to path.
func writeHeapProfile(path string) {
	runtime.GC()
	writeProfile("heap", 0, path)
}

// writeProfile writes the named runtime profile to path, whole or not at
// all (a reader polls for the file: waitForFile).
func writeProfile(name string, debug int, path string) {
	f, err := os.Create(path + ".tmp")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	err = pprof.Lookup(name).WriteTo(f, debug)
	_ = f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	_ = os.Rename(path+".tmp", path)
}

// waitForFile waits up to ten seconds for the file the operator process
// writes when signalled.
func waitForFile(b *testing.B, path string) {
	b.Helper()
	for range 100 {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatalf("the operator process wrote nothing at %s", path)
}

// startCPUProfile starts the process's CPU profile; the returned stop
// (safe to call again) ends it and puts it at path.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			_ = f.Close()
			_ = os.Rename(path+".tmp", path)
		})
	}, nil
}

// profiles asks the process for its heap profile and the end of its CPU
// profile, if the run wants them (BENCH_HEAP_PROFILE, BENCH_CPU_PROFILE),
// and waits for them.
func (c *child) profiles(b *testing.B) {
	b.Helper()
	var paths []string
	for _, env := range []string{childHeapProfile, childCPUProfile} {
		if path := os.Getenv(env); path != "" {
			_ = os.Remove(path)
			paths = append(paths, path)
		}
	}
	if len(paths) == 0 {
		return
	}
	if err := c.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		b.Fatal(err)
	}
	for _, path := range paths {
		waitForFile(b, path)
	}
}

// child is an operator process started by startChild.
type child struct {
	cmd     *exec.Cmd
	metrics string
	// anonPeak is the largest RssAnon seen, in KiB (sampleAnon).
	anonPeak atomic.Int64
	// goroutineFile is where it writes its goroutines when asked
	// (stacks); "" for the shipped binary, which cannot.
	goroutineFile string
	// settledStacks is its goroutines by stack once settled after the run
	// without faults (BenchmarkFleetFaults).
	settledStacks map[string]int
}

// startChild starts the operator process on the providers config and
// waits until it is ready; env is added to its environment.
func startChild(b testing.TB, resync time.Duration, providers string, env ...string) *child {
	b.Helper()
	dir := b.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig); err != nil {
		b.Fatal(err)
	}
	c := &child{metrics: metricstest.FreeAddr(b)}
	health := metricstest.FreeAddr(b)
	if bin := shipped(); bin != "" {
		c.cmd = shippedCommand(b, bin, resync, providers, c.metrics, health, env)
		c.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	} else {
		c.goroutineFile = filepath.Join(dir, "goroutines.txt")
		c.cmd = exec.CommandContext(context.Background(), os.Args[0], "-test.run=^$")
		c.cmd.Env = append(os.Environ(), childEnv+"=1", "KUBECONFIG="+kubeconfig, childProviders+"="+providers,
			childMetrics+"="+c.metrics, childHealth+"="+health, childResync+"="+resync.String(), childGoroutines+"="+c.goroutineFile)
		c.cmd.Env = append(c.cmd.Env, env...)
	}
	if limit := os.Getenv(operatorMemLimit); limit != "" {
		c.cmd.Env = append(c.cmd.Env, "GOMEMLIMIT="+limit)
	}
	c.cmd.Stdout, c.cmd.Stderr = os.Stderr, os.Stderr
	if err := c.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go c.sampleAnon()
	deadline := time.Now().Add(time.Minute)
	for {
		ready := metricstest.Scrape(b, "http://"+health+"/readyz", "")
		if ready.Code == http.StatusOK {
			return c
		}
		if time.Now().After(deadline) {
			c.stop()
			b.Fatalf("the operator process was not ready within a minute: %s", ready)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends the process and waits for it.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	_ = c.cmd.Wait()
}

// kill ends the process at once, as the kernel's OOM killer or a node's
// loss does: no deferred call, no lease released, no operation finished.
func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	_ = c.cmd.Wait()
}

// shippedCommand runs the shipped binary as its Deployment does but for
// the addresses it binds: plain-HTTP metrics (the benchmark scrapes them
// as it scrapes its own operator mode), no leader election; BENCH_WORKERS
// as its --max-concurrent-reconciles. The settings only the operator mode
// takes (its resync, the quota back-off, a heap profile, a log) are
// refused: the shipped binary runs at its defaults.
func shippedCommand(b testing.TB, bin string, resync time.Duration, providers, metrics, health string, env []string) *exec.Cmd {
	b.Helper()
	if resync != proxy.DefaultResync || len(env) > 0 || os.Getenv(childHeapProfile) != "" || os.Getenv(childCPUProfile) != "" || os.Getenv(childLog) != "" {
		b.Fatalf("%s runs the shipped binary at its defaults: no resync but %s, no %v, %s, %s or %s", shippedBinary,
			proxy.DefaultResync, env, childHeapProfile, childCPUProfile, childLog)
	}
	args := []string{"--providers-config=" + providers, "--metrics-bind-address=" + metrics, "--metrics-secure=false",
		"--health-probe-bind-address=" + health}
	if w := os.Getenv(childWorkers); w != "" {
		args = append(args, "--max-concurrent-reconciles="+w)
	}
	return exec.CommandContext(context.Background(), bin, args...)
}

// sampleAnon records the process's anonymous resident memory (RssAnon:
// heap, stacks, the runtime's) every 100 ms until it exits; the kernel
// keeps a high-water mark of the whole resident set only (VmHWM), which
// counts the binary's file pages too.
func (c *child) sampleAnon() {
	path := fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid)
	for {
		status, err := os.ReadFile(path)
		if err != nil {
			return
		}
		for line := range strings.Lines(string(status)) {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "RssAnon:" {
				if kib, err := strconv.ParseInt(f[1], 10, 64); err == nil && kib > c.anonPeak.Load() {
					c.anonPeak.Store(kib)
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// peakAnon is the largest anonymous resident memory sampleAnon saw, in
// MiB.
func (c *child) peakAnon() float64 { return float64(c.anonPeak.Load()) / 1024 }

// peakRSS is the process's resident set's high-water mark (VmHWM), in MiB.
func (c *child) peakRSS(b *testing.B) float64 {
	b.Helper()
	return c.status(b, "VmHWM:")
}

// fileRSS is how much of the process's resident memory is file pages now
// (RssFile): the binary's code and data, mapped from the executable. The
// benchmark's binary links vcsim, envtest and the benchmark beside the
// operator, so this part is larger than the shipped binary's.
func (c *child) fileRSS(b *testing.B) float64 {
	b.Helper()
	return c.status(b, "RssFile:")
}

// status is a kB field of the process's /proc/pid/status, in MiB.
func (c *child) status(b *testing.B, field string) float64 {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == field {
			kib, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				b.Fatal(err)
			}
			return kib / 1024
		}
	}
	b.Fatalf("no %s in /proc/pid/status", field)
	return 0
}

// goroutines is the process's goroutine count (the Go collector's
// go_goroutines).
func (c *child) goroutines(b *testing.B) float64 {
	b.Helper()
	for _, m := range c.scrape(b)["go_goroutines"].GetMetric() {
		return m.GetGauge().GetValue()
	}
	b.Fatal("no go_goroutines in the operator's metrics")
	return 0
}

// callErrors sums the operator's failed provider calls by error class
// (egressproxies_provider_call_errors_total).
func (c *child) callErrors(b *testing.B) map[string]float64 {
	b.Helper()
	out := map[string]float64{}
	for _, m := range c.scrape(b)["egressproxies_provider_call_errors_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "class" {
				out[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// apiRequests sums the operator's requests to the API server whose method
// is one of methods, or all of them (apiCalls).
func (c *child) apiRequests(b *testing.B, methods ...string) float64 {
	b.Helper()
	byMethod, _ := c.apiCalls(b)
	total := 0.0
	for method, n := range byMethod {
		if len(methods) == 0 || slices.Contains(methods, method) {
			total += n
		}
	}
	return total
}

// apiCalls is the operator's API-server requests so far by method, and
// how many were answered Conflict (client-go's rest_client_requests_total).
func (c *child) apiCalls(b *testing.B) (byMethod map[string]float64, conflicts float64) {
	b.Helper()
	byMethod = map[string]float64{}
	for _, m := range c.scrape(b)["rest_client_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			switch {
			case l.GetName() == "method":
				byMethod[l.GetValue()] += m.GetCounter().GetValue()
			case l.GetName() == "code" && l.GetValue() == "409":
				conflicts += m.GetCounter().GetValue()
			}
		}
	}
	return byMethod, conflicts
}

// queue is the Proxy controller's workqueue so far: how long items waited
// in it and how long their reconciles took (controller-runtime's
// workqueue_queue_duration_seconds and workqueue_work_duration_seconds).
type queue struct{ waited, worked, items float64 }

func (c *child) queue(b *testing.B) queue {
	b.Helper()
	families := c.scrape(b)
	var q queue
	sum := func(name string) (float64, float64) {
		for _, m := range families[name].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == "proxy" {
					return m.GetHistogram().GetSampleSum(), float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
		return 0, 0
	}
	q.waited, q.items = sum("workqueue_queue_duration_seconds")
	q.worked, _ = sum("workqueue_work_duration_seconds")
	return q
}

// since reports the items (reconciles) since before, and their mean wait
// and reconcile, in ms.
func (q queue) since(before queue) (items, waitMs, workMs float64) {
	n := q.items - before.items
	if n == 0 {
		return 0, 0, 0
	}
	return n, 1000 * (q.waited - before.waited) / n, 1000 * (q.worked - before.worked) / n
}

// scrape reads the operator's metrics.
func (c *child) scrape(b *testing.B) map[string]*dto.MetricFamily {
	b.Helper()
	answer := metricstest.Scrape(b, "http://"+c.metrics+"/metrics", "")
	if answer.Code != http.StatusOK {
		b.Fatalf("metrics: %s", answer)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(answer.Body))
	if err != nil {
		b.Fatal(err)
	}
	return families
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
