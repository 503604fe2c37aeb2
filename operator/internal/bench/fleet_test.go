package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace/noop"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/config"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller/proxy"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/devsim"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/identity"
)

// fleetWorkers is the bare path's concurrency in the fleet benchmark: the
// provider entry's limits.concurrency, how many provider calls the
// operator makes at once.
const fleetWorkers = 16

// resyncPeriods is how many Ready resync periods the steady state is
// counted over.
const resyncPeriods = 2

// BenchmarkFleet makes a fleet of Proxies at once through the operator and
// the same number of VMs through the bare govmomi sequence at the same
// concurrency, on the same vcsim, in the same run; then deletes them.
// Sizes and task latencies come from BENCH_FLEET (default "100") and
// BENCH_CLONE (default "0s"), comma-separated (the latency is the clone's
// and the deletion's power-off and destroy, tasksTake); BENCH_RESYNC is the
// operator's Ready resync period (default 10s). The operator runs as a
// process of its own (process_test.go) so its peak RSS is its own.
//
// Metrics, per path: create-ms (all Ready), delete-ms (all gone),
// calls/create, calls/delete (SOAP requests per VM through the front);
// for the operator also calls/resync (SOAP per Proxy per steady-state
// resync period), writes/resync (API writes per Proxy per period),
// api/proxy (API requests per Proxy from create to gone, steady state
// excluded), peak-MiB, and sweep-ms, sweep-calls, sweep-KiB: one GC
// listing of the whole fleet through the same provider code; and from the
// workqueue's metrics, the mean time a Proxy waited in the queue and a
// reconcile took, while creating and while deleting. Both paths report
// the connections made to vCenter while creating and deleting, each a TLS
// handshake.
func BenchmarkFleet(b *testing.B) {
	sizes := envList(b, "BENCH_FLEET", "100", strconv.Atoi)
	clones := envList(b, "BENCH_CLONE", "0s", time.ParseDuration)
	resync := envList(b, "BENCH_RESYNC", "10s", time.ParseDuration)[0]
	if shipped() != "" {
		// The shipped binary at its defaults (BENCH_SHIPPED=1), its probe
		// answered on the Proxies' port.
		resync = proxy.DefaultResync
		shippedStandIn(b, int(benchProxy("", 0).Spec.Port))
	}
	for _, n := range sizes {
		for _, clone := range clones {
			name := fmt.Sprintf("proxies=%d,clone=%s", n, clone)
			b.Run("sdk/"+name, func(b *testing.B) {
				defer tasksTake(clone)()
				for b.Loop() {
					fleetSDK(b, n)
				}
			})
			b.Run("operator/"+name, func(b *testing.B) {
				defer tasksTake(clone)()
				for b.Loop() {
					fleetOperator(b, n, resync)
				}
			})
		}
	}
}

// tasksTake makes vcsim answer the fleet's slow vCenter calls after d —
// the clone, and the deletion's power-off and destroy — for both paths,
// and returns the undo. The Delete's third task, its deleting mark, is a
// reconfigure, which the played guests use too, so it is not delayed.
func tasksTake(d time.Duration) func() {
	if d == 0 {
		return func() {}
	}
	ms := int(d.Milliseconds())
	sim.Model.DelayConfig.MethodDelay = map[string]int{"CloneVM_Task": ms, "PowerOffVM_Task": ms, "Destroy_Task": ms}
	return func() { sim.Model.DelayConfig.MethodDelay = nil }
}

func fleetSDK(b *testing.B, n int) {
	sdk := loginSDK(b)
	before, dialled := calls.Load(), conns.Load()
	cpuStart := sampleCPU(b, 0)
	created, vms := sdk.create(b, n, fleetWorkers)
	createCalls, createConns := calls.Load()-before, conns.Load()-dialled
	cpuCreated := sampleCPU(b, 0)
	before, dialled = calls.Load(), conns.Load()
	deleted := sdk.destroy(b, vms, fleetWorkers)
	deleteCalls, deleteConns := calls.Load()-before, conns.Load()-dialled
	cpuDeleted := sampleCPU(b, 0)
	cpuCreated.report(b, "create", cpuStart)
	cpuDeleted.report(b, "delete", cpuCreated)
	b.ReportMetric(float64(created.Milliseconds()), "create-ms")
	b.ReportMetric(float64(deleted.Milliseconds()), "delete-ms")
	b.ReportMetric(float64(createCalls)/float64(n), "calls/create")
	b.ReportMetric(float64(deleteCalls)/float64(n), "calls/delete")
	b.ReportMetric(float64(createConns), "create-conns")
	b.ReportMetric(float64(deleteConns), "delete-conns")
}

func fleetOperator(b *testing.B, n int, resync time.Duration) {
	ctx := context.Background()
	op := startChild(b, resync, providersConfig)
	defer op.stop()
	ns := fmt.Sprintf("fleet-%d", time.Now().UnixNano())
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	defer deleteServices(b, ns)

	apiBefore, before, start, queued, dialled := op.apiRequests(b), calls.Load(), time.Now(), op.queue(b), conns.Load()
	cpuStart := sampleCPU(b, op.cmd.Process.Pid)
	createProxies(b, ns, n)
	waitProxies(b, ns, func(ps []v1alpha1.Proxy) bool { return countReady(ps) == n })
	created, createCalls := time.Since(start), calls.Load()-before
	cpuCreated := sampleCPU(b, op.cmd.Process.Pid)
	apiCreate := op.apiRequests(b) - apiBefore
	createItems, createWait, createWork := op.queue(b).since(queued)
	createConns := conns.Load() - dialled

	sweepMs, sweepCalls, sweepBytes := fleetSweep(b, n)
	op.profiles(b)

	// Steady state: one period to let the last writes settle, then count.
	time.Sleep(resync)
	before, writesBefore := calls.Load(), op.apiRequests(b, "POST", "PUT", "PATCH", "DELETE")
	time.Sleep(resyncPeriods * resync)
	perResync := float64(calls.Load()-before) / float64(resyncPeriods*n)
	writes := (op.apiRequests(b, "POST", "PUT", "PATCH", "DELETE") - writesBefore) / float64(resyncPeriods*n)

	apiBefore, before, start, queued, dialled = op.apiRequests(b), calls.Load(), time.Now(), op.queue(b), conns.Load()
	cpuDeleting := sampleCPU(b, op.cmd.Process.Pid)
	byMethod, conflicts := op.apiCalls(b)
	if err := k8s.DeleteAllOf(ctx, &v1alpha1.Proxy{}, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	waitProxies(b, ns, func(ps []v1alpha1.Proxy) bool { return len(ps) == 0 })
	deleted, deleteCalls := time.Since(start), calls.Load()-before
	cpuDeleted := sampleCPU(b, op.cmd.Process.Pid)
	byMethodAfter, conflictsAfter := op.apiCalls(b)
	for method, after := range byMethodAfter {
		b.ReportMetric((after-byMethod[method])/float64(n), "delete-api-"+method)
	}
	b.ReportMetric((conflictsAfter-conflicts)/float64(n), "delete-api-409")
	apiDelete := op.apiRequests(b) - apiBefore
	deleteItems, deleteWait, deleteWork := op.queue(b).since(queued)
	deleteConns := conns.Load() - dialled

	b.ReportMetric(float64(created.Milliseconds()), "create-ms")
	b.ReportMetric(float64(deleted.Milliseconds()), "delete-ms")
	b.ReportMetric(float64(createCalls)/float64(n), "calls/create")
	b.ReportMetric(float64(deleteCalls)/float64(n), "calls/delete")
	b.ReportMetric(perResync, "calls/resync")
	b.ReportMetric(writes, "writes/resync")
	b.ReportMetric((apiCreate+apiDelete)/float64(n), "api/proxy")
	b.ReportMetric(op.peakRSS(b), "peak-MiB")
	b.ReportMetric(op.fileRSS(b), "file-MiB")
	b.ReportMetric(op.peakAnon(), "peak-anon-MiB")
	b.ReportMetric(sweepMs, "sweep-ms")
	b.ReportMetric(sweepCalls, "sweep-calls")
	b.ReportMetric(sweepBytes/1024, "sweep-KiB")
	b.ReportMetric(createItems/float64(n), "create-reconciles")
	b.ReportMetric(deleteItems/float64(n), "delete-reconciles")
	b.ReportMetric(createWait, "create-queued-ms")
	b.ReportMetric(createWork, "create-reconcile-ms")
	b.ReportMetric(deleteWait, "delete-queued-ms")
	b.ReportMetric(deleteWork, "delete-reconcile-ms")
	b.ReportMetric(float64(createConns), "create-conns")
	b.ReportMetric(float64(deleteConns), "delete-conns")
	cpuCreated.report(b, "create", cpuStart)
	cpuDeleted.report(b, "delete", cpuDeleting)
}

// createProxies creates n Proxies in ns, fleetWorkers at a time, as a
// platform team's tooling applying a fleet would.
func createProxies(b *testing.B, ns string, n int) {
	b.Helper()
	var wg sync.WaitGroup
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	for range fleetWorkers {
		wg.Go(func() {
			for i := range next {
				if err := k8s.Create(context.Background(), benchProxy(ns, i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

func countReady(ps []v1alpha1.Proxy) int {
	ready := 0
	for _, p := range ps {
		if p.Status.Phase == v1alpha1.PhaseReady {
			ready++
		}
	}
	return ready
}

// fleetSweep lists the fleet as the operator's garbage collector does,
// through the provider built from the operator's own config, and returns
// the time, SOAP calls and bytes one listing took.
func fleetSweep(b *testing.B, n int) (ms, soap, bytes float64) {
	b.Helper()
	ctx := context.Background()
	cfg, err := config.Load(providersConfig, devsim.Registry())
	if err != nil {
		b.Fatal(err)
	}
	if cfg.InstallID, err = identity.Resolve(ctx, k8s, cfg.InstallID); err != nil {
		b.Fatal(err)
	}
	set, err := config.Build(cfg, devsim.Registry(), noop.NewTracerProvider())
	if err != nil {
		b.Fatal(err)
	}
	entry := set.All()[0]
	// The first listing logs in and finds the folder: a sweep's steady cost is the second.
	if _, err := entry.Provider.ListByTag(ctx, contract.LabelManaged, entry.Owner); err != nil {
		b.Fatal(err)
	}
	before, bytesBefore, start := calls.Load(), received.Load(), time.Now()
	found, err := entry.Provider.ListByTag(ctx, contract.LabelManaged, entry.Owner)
	if err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	if len(found) != n {
		b.Fatalf("the sweep listed %d instances of a fleet of %d", len(found), n)
	}
	return float64(elapsed.Microseconds()) / 1000, float64(calls.Load() - before), float64(received.Load() - bytesBefore)
}

// envList parses the comma-separated list in the environment variable, or
// def.
func envList[T any](b *testing.B, name, def string, parse func(string) (T, error)) []T {
	b.Helper()
	raw := os.Getenv(name)
	if raw == "" {
		raw = def
	}
	var out []T
	for s := range strings.SplitSeq(raw, ",") {
		v, err := parse(strings.TrimSpace(s))
		if err != nil {
			b.Fatalf("%s=%q: %v", name, raw, err)
		}
		out = append(out, v)
	}
	return out
}
