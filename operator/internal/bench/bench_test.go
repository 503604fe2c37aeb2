package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// BenchmarkReady measures Proxy created → Ready through the operator, and
// the bare govmomi sequence it automates (clone, power on, wait for the
// guest's address) on the same vcsim, at the same concurrency, in the same
// run. Both find the address by polling every 20 ms, and the same played
// guest reports it. Metrics: ms (mean wall time for the batch), calls/create
// (SOAP requests per instance), and for the operator calls/resync (SOAP
// requests per Proxy per steady-state resync).
//
// vcsim clones in microseconds, so the plain cases measure the operator's
// fixed cost (its Kubernetes writes) against almost nothing. The clone=1s
// case makes vcsim answer CloneVM_Task after a second, which both paths
// call once per VM — a fast linked clone on a real vCenter; a full clone
// takes far longer.
func BenchmarkReady(b *testing.B) {
	cases := []struct {
		name    string
		proxies int
		clone   time.Duration
	}{
		{"proxies=1", 1, 0},
		{"proxies=100", 100, 0},
		{"proxies=1,clone=1s", 1, time.Second},
	}
	// Warm both paths once, untimed: the SOAP sessions, the provider's
	// inventory cache and the API server's first writes are one-off costs.
	defer startInProcess(b)()
	throughSDK(b, 1)
	throughOperator(b, 1)
	for _, c := range cases {
		b.Run("sdk/"+c.name, func(b *testing.B) {
			defer cloneTakes(c.clone)()
			var m mean
			for b.Loop() {
				elapsed, perCreate := throughSDK(b, c.proxies)
				m.add(elapsed, perCreate, 0)
			}
			m.report(b, false)
		})
		b.Run("operator/"+c.name, func(b *testing.B) {
			defer cloneTakes(c.clone)()
			var m mean
			for b.Loop() {
				m.add(throughOperator(b, c.proxies))
			}
			m.report(b, true)
		})
	}
}

// mean averages the metrics over a benchmark's iterations (ReportMetric
// keeps only the last value it is given).
type mean struct {
	n                  int
	elapsed            time.Duration
	perCreate, resyncs float64
}

func (m *mean) add(elapsed time.Duration, perCreate, perResync float64) {
	m.n++
	m.elapsed += elapsed
	m.perCreate += perCreate
	m.resyncs += perResync
}

func (m *mean) report(b *testing.B, resyncs bool) {
	n := float64(m.n)
	b.ReportMetric(float64(m.elapsed.Milliseconds())/n, "ms")
	b.ReportMetric(m.perCreate/n, "calls/create")
	if resyncs {
		b.ReportMetric(m.resyncs/n, "calls/resync")
	}
}

// cloneTakes makes vcsim answer CloneVM_Task after d, and returns the undo.
func cloneTakes(d time.Duration) func() {
	if d == 0 {
		return func() {}
	}
	sim.Model.DelayConfig.MethodDelay = map[string]int{"CloneVM_Task": int(d.Milliseconds())}
	return func() { sim.Model.DelayConfig.MethodDelay = nil }
}

func throughOperator(b *testing.B, n int) (time.Duration, float64, float64) {
	ctx := context.Background()
	ns := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	before := calls.Load()
	start := time.Now()
	for i := range n {
		if err := k8s.Create(ctx, benchProxy(ns, i)); err != nil {
			b.Fatal(err)
		}
	}
	waitProxies(b, ns, func(ps []v1alpha1.Proxy) bool { return countReady(ps) == n })
	elapsed := time.Since(start)
	created := calls.Load() - before

	// Steady state: three resync intervals (1 s each in this run).
	before = calls.Load()
	time.Sleep(3 * time.Second)
	resync := calls.Load() - before

	b.StopTimer()
	if err := k8s.DeleteAllOf(ctx, &v1alpha1.Proxy{}, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	waitProxies(b, ns, func(ps []v1alpha1.Proxy) bool { return len(ps) == 0 })
	deleteServices(b, ns)
	b.StartTimer()
	return elapsed, float64(created) / float64(n), float64(resync) / float64(3*n)
}

// benchProxy is the i-th Proxy of a benchmark in ns.
func benchProxy(ns string, i int) *v1alpha1.Proxy {
	return &v1alpha1.Proxy{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i), Namespace: ns},
		Spec: v1alpha1.ProxySpec{Provider: "bench", Port: 3128,
			Placement: v1alpha1.Placement{Region: "dc0", Zone: "c0", MachineType: "small", Image: "debian-12"}},
	}
}

// deleteServices deletes the namespace's Services, which Kubernetes'
// garbage collector would delete with their Proxy; envtest runs none, and
// the ClusterIP range would run out after a few hundred.
func deleteServices(b testing.TB, ns string) {
	b.Helper()
	var list corev1.ServiceList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	for i := range list.Items {
		if err := k8s.Delete(context.Background(), &list.Items[i]); client.IgnoreNotFound(err) != nil {
			b.Fatal(err)
		}
	}
}

// waitLimit bounds a benchmark's wait for its Proxies: a thousand
// deleted by an operator that lists the folder twice per Proxy took over
// five minutes (the fleet benchmark, docs/performance.md).
const waitLimit = 30 * time.Minute

// waitProxies returns once done holds for the namespace's Proxies. It
// watches rather than polls, so the operator's time is not padded by a
// poll interval the bare path does not pay.
func waitProxies(b *testing.B, ns string, done func([]v1alpha1.Proxy) bool) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var list v1alpha1.ProxyList
	if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	seen := map[string]v1alpha1.Proxy{}
	for _, p := range list.Items {
		seen[p.Name] = p
	}
	current := func() []v1alpha1.Proxy {
		out := make([]v1alpha1.Proxy, 0, len(seen))
		for _, p := range seen {
			out = append(out, p)
		}
		return out
	}
	if done(current()) {
		return
	}
	w, err := k8s.Watch(ctx, &v1alpha1.ProxyList{}, client.InNamespace(ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	// A long wait (a fleet under faults) says where it stands every
	// progressEvery; hack/bench-fleet-faults.sh shows it as it comes.
	progress := time.NewTicker(progressEvery)
	defer progress.Stop()
	for {
		select {
		case ev, open := <-w.ResultChan():
			if !open {
				b.Fatalf("timed out in namespace %s; Proxies by phase/reason: %v", ns, byPhase(current()))
			}
			p, ok := ev.Object.(*v1alpha1.Proxy)
			if !ok {
				b.Fatalf("watch in namespace %s: %v", ns, ev.Object)
			}
			if ev.Type == watch.Deleted {
				delete(seen, p.Name)
			} else {
				seen[p.Name] = *p
			}
			if done(current()) {
				return
			}
		case <-progress.C:
			fmt.Fprintf(os.Stderr, "%s %s: %d Proxies by phase/reason: %v\n",
				time.Now().Format(time.TimeOnly), ns, len(seen), byPhase(current()))
		}
	}
}

// progressEvery is how often waitProxies reports a wait still going.
const progressEvery = time.Minute

// byPhase counts Proxies by phase and Ready reason.
func byPhase(ps []v1alpha1.Proxy) map[string]int {
	phases := map[string]int{}
	for _, p := range ps {
		key := string(p.Status.Phase)
		if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			key += "/" + c.Reason
		}
		phases[key]++
	}
	return phases
}

func throughSDK(b *testing.B, n int) (time.Duration, float64) {
	sdk := loginSDK(b)
	before := calls.Load()
	elapsed, vms := sdk.create(b, n, workers)
	created := calls.Load() - before
	b.StopTimer()
	sdk.destroy(b, vms, workers)
	b.StartTimer()
	return elapsed, float64(created) / float64(n)
}
