package proxy

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest/memprovider"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metrics"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// The suite's second provider entry, "slow": the reference provider over a
// memory Cloud of its own, behind a seam that makes its Creates take
// minutes (a real full clone does) while a test says so. It admits fewer
// Creates (all but one of its call slots) than there are reconcile
// workers, so a Create waiting for a slot shows too.
const slowProvider = "slow"

var (
	slowCloud   *memprovider.Cloud
	slowControl memprovider.Control
	slowGate    = &slowCalls{}
)

// slowEntry builds the "slow" entry, decorated as config.Build decorates
// a configured provider.
func slowEntry(tp trace.TracerProvider) (*providers.Entry, error) {
	slowCloud = memprovider.NewCloud(testToken, []string{"r1"}, []string{"debian-12-proxy"}, 0)
	slowControl = memprovider.Control{Cloud: slowCloud}
	prov, err := memprovider.New(memprovider.Config{
		Token: testToken, Regions: []string{"r1"},
		MachineTypes: map[string]memprovider.MachineType{"small": {CPUs: 1, MemoryMiB: 512}},
		Images:       map[string]string{"debian-12": "debian-12-proxy"},
		CallTimeout:  2 * time.Second,
	}, slowCloud)
	if err != nil {
		return nil, err
	}
	return &providers.Entry{
		Name: slowProvider, Type: memprovider.Type, Owner: "test-" + slowProvider,
		Provider:      providers.Instrument(slowProvider, memprovider.Type, providers.Limit(&slowSeam{Provider: prov, gate: slowGate}, providers.Limits{QPS: 1000, Burst: 1000, Concurrency: slowConcurrency}), tp),
		GC:            providers.GC{MinAge: time.Hour, Interval: time.Hour},
		CheckInterval: time.Hour,
	}, nil
}

// slowCalls is what the slow entry's backend is slow at: while creates is
// stalled, every Create waits until it is released, or ten minutes; while
// reads is, every Get and ListByTag does (a backend that hangs).
type slowCalls struct {
	creates, reads contracttest.Gate
	held           atomic.Int32 // Creates waiting in the backend now
	heldReads      atomic.Int32 // reads waiting in the backend now
}

type slowSeam struct {
	*memprovider.Provider
	gate *slowCalls
}

func (p *slowSeam) Create(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
	p.gate.held.Add(1)
	wait, cancel := context.WithTimeout(ctx, 10*time.Minute)
	err := p.gate.creates.Pass(wait)
	cancel()
	p.gate.held.Add(-1)
	if ctx.Err() != nil {
		return contract.Instance{}, fmt.Errorf("create %s: %w", req.Name, ctx.Err())
	}
	_ = err // ten minutes passed: the clone is done
	return p.Provider.Create(ctx, req)
}

func (p *slowSeam) Get(ctx context.Context, providerID string) (contract.Instance, error) {
	if err := p.read(ctx); err != nil {
		return contract.Instance{}, err
	}
	return p.Provider.Get(ctx, providerID)
}

func (p *slowSeam) ListByTag(ctx context.Context, key, value string) ([]contract.Instance, error) {
	if err := p.read(ctx); err != nil {
		return nil, err
	}
	return p.Provider.ListByTag(ctx, key, value)
}

// read waits while reads are stalled, or ten minutes.
func (p *slowSeam) read(ctx context.Context) error {
	p.gate.heldReads.Add(1)
	defer p.gate.heldReads.Add(-1)
	wait, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	_ = p.gate.reads.Pass(wait)
	return ctx.Err()
}

// slowConcurrency is the slow entry's limits.concurrency: fewer than the
// Proxies the tests put on it.
const slowConcurrency = 3

// slowCreates makes every Create on the slow entry take minutes until the
// returned release is called (the test's cleanup calls it too).
func slowCreates(t *testing.T) (release func()) {
	t.Helper()
	release = slowGate.creates.Stall()
	t.Cleanup(release)
	return release
}

// slowReads makes every Get and ListByTag on the slow entry hang until the
// returned release is called (the test's cleanup calls it too).
func slowReads(t *testing.T) (release func()) {
	t.Helper()
	release = slowGate.reads.Stall()
	t.Cleanup(release)
	return release
}

func onSlow(p *v1alpha1.Proxy) { p.Spec.Provider = slowProvider }

// briskLifecycles takes n Proxies on the mem entry from creation to Ready
// to gone, one after the other, and logs how long each took.
func briskLifecycles(t *testing.T, prefix string, n int) {
	t.Helper()
	for i := range n {
		start := time.Now()
		p := newProxy(t, fmt.Sprintf("%s-%d", prefix, i), nil)
		bootGuest(t, p, current)
		waitReady(t, p)
		ready := time.Since(start)
		deleteProxy(t, p)
		t.Logf("%s: Ready after %s, deleted %s later", p.Name, ready.Round(time.Millisecond), (time.Since(start) - ready).Round(time.Millisecond))
	}
}

// A backend whose Creates take minutes holds none of the reconcile
// workers: with more of its Proxies creating than there are workers (and
// than its cap on calls in flight), Proxies on another provider entry are
// created, become Ready and are deleted as fast as ever.
func TestSlowBackendStallsOnlyItsOwnProxies(t *testing.T) {
	briskLifecycles(t, "unhurried", 2) // the pace with no slow backend, for the log
	release := slowCreates(t)
	defer release() // before the slow Proxies' deletion, which waits for their Creates
	for i := range 5 {
		newProxy(t, fmt.Sprintf("slow-%d", i), onSlow)
	}
	// Creates may take all but one of the entry's call slots.
	eventually(t, "the slow backend holds Creates", func() bool { return slowGate.held.Load() >= slowConcurrency-1 })
	// Every slow Create is under way, those waiting for a call slot too,
	// and the metric says which backend is slow.
	eventually(t, "five Creates in flight on the slow entry", func() bool {
		return testutil.ToFloat64(metrics.OperationsInFlight.WithLabelValues(slowProvider, "Create")) == 5
	})

	briskLifecycles(t, "brisk", 3)
}

// A backend that stops answering (every Get and ListByTag hangs) holds
// none of the workers either: its Ready Proxies' resyncs, more of them
// than there are workers, wait in their operations while Proxies on
// another entry come and go.
func TestHungBackendStallsOnlyItsOwnProxies(t *testing.T) {
	var hung []*v1alpha1.Proxy
	for i := range 4 {
		p := newProxy(t, fmt.Sprintf("hung-%d", i), onSlow)
		bootGuestOn(t, slowControl, p, current)
		hung = append(hung, p)
	}
	for _, p := range hung {
		waitReady(t, p)
	}
	release := slowReads(t)
	defer release() // before the hung Proxies' deletion, which lists their instances
	eventually(t, "the slow backend holds the resyncs' reads", func() bool { return slowGate.heldReads.Load() >= 2 })
	briskLifecycles(t, "spry", 3)
}

// A Proxy deleted while its Create runs shows Deleting at once, waits for
// the Create without holding a worker, then deletes the instance it made:
// nothing is left on the backend.
func TestProxyDeletedDuringItsCreateLeavesNothing(t *testing.T) {
	ctx := context.Background()
	release := slowCreates(t)
	defer release()
	p := newProxy(t, "slowdel", onSlow)
	eventually(t, "the Create of slowdel is in the backend", func() bool { return slowGate.held.Load() == 1 })
	uid := get(t, p).UID
	if err := k8s.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "phase Deleting while the Create runs", func() bool { return get(t, p).Status.Phase == v1alpha1.PhaseDeleting })
	if slowGate.held.Load() != 1 {
		t.Fatal("the Create ended before the test released it")
	}
	release()
	deleteProxy(t, p)
	if left := liveInstances(t, slowProvider, string(uid)); len(left) != 0 {
		t.Errorf("instances outlived their Proxy, deleted while its Create ran: %+v", left)
	}
}

// A spec changed while the Create runs waits for it: the VM it made is
// recorded, then replaced like any other, and none is left behind.
func TestSpecChangedDuringACreateReplacesTheVMItMade(t *testing.T) {
	release := slowCreates(t)
	defer release()
	p := newProxy(t, "slowspec", onSlow)
	eventually(t, "the Create of slowspec is in the backend", func() bool { return slowGate.held.Load() == 1 })
	first := get(t, p).Status.Instance.Name
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Port = 8080 })
	release()
	eventually(t, "the first VM is recorded and a replacement created", func() bool {
		s := get(t, p).Status
		return s.Instance != nil && s.Instance.Name == first && s.Instance.ProviderID != "" &&
			s.Replacement != nil && s.Replacement.ProviderID != ""
	})
	bootGuestOn(t, slowControl, p, replacement)
	done := waitReady(t, p)
	if done.Status.Instance.Name == first || done.Spec.Port != 8080 {
		t.Fatalf("serving %s on %d, want the replacement on 8080", done.Status.Instance.Name, done.Spec.Port)
	}
	eventually(t, "only the replacement is left", func() bool {
		left := liveInstances(t, slowProvider, string(p.UID))
		return len(left) == 1 && left[0].ProviderID == done.Status.Instance.ProviderID
	})
}

// A spec changed again while its replacement's Create runs waits for that
// Create too: the replacement it made is recorded, then retired for the
// newer spec, and none is left behind.
func TestSpecChangedDuringAReplacementsCreateRetiresTheVMItMade(t *testing.T) {
	p := newProxy(t, "slowrepl", onSlow)
	bootGuestOn(t, slowControl, p, current)
	first := waitReady(t, p).Status.Instance.Name
	release := slowCreates(t)
	defer release()
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Port = 8080 })
	eventually(t, "the replacement's Create is in the backend", func() bool { return slowGate.held.Load() == 1 })
	made := get(t, p).Status.Replacement.Name
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Port = 9090 })
	release()
	eventually(t, "a replacement for the newer spec is created", func() bool {
		r := get(t, p).Status.Replacement
		return r != nil && r.Name != made && r.ProviderID != ""
	})
	bootGuestOn(t, slowControl, p, replacement)
	var done *v1alpha1.Proxy
	eventually(t, "the replacement for the newer spec serves", func() bool {
		done = get(t, p)
		return done.Status.Phase == v1alpha1.PhaseReady && done.Status.Instance.Name != first && done.Status.Replacement == nil
	})
	if done.Status.Instance.Name == made || done.Spec.Port != 9090 {
		t.Fatalf("serving %s on %d, want the second replacement on 9090", done.Status.Instance.Name, done.Spec.Port)
	}
	eventually(t, "only the second replacement is left", func() bool {
		left := liveInstances(t, slowProvider, string(p.UID))
		return len(left) == 1 && left[0].ProviderID == done.Status.Instance.ProviderID
	})
}

// testDeadline bounds each of the suite's reconciles.
const testDeadline = 3 * time.Second

// hangingSecrets is the reconciler's Secret reader, except that reading a
// Secret named hang-* waits until ctx ends: an API server that does not
// answer.
type hangingSecrets struct{ client.Reader }

func (h hangingSecrets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, secret := obj.(*corev1.Secret); secret && strings.HasPrefix(key.Name, "hang-") {
		<-ctx.Done()
		return ctx.Err()
	}
	return h.Reader.Get(ctx, key, obj, opts...)
}

// Every reconcile has a deadline: one whose API server read does not
// answer ends at it (and is retried) rather than holding its worker for
// good. Three workers by default.
func TestReconcilesAreBounded(t *testing.T) {
	if n := controllerMetric(t, "controller_runtime_max_concurrent_reconciles"); n != DefaultWorkers {
		t.Errorf("%v concurrent reconciles, want the default %d", n, DefaultWorkers)
	}
	timeouts := controllerMetric(t, "controller_runtime_reconcile_timeouts_total")
	newProxy(t, "hung", func(p *v1alpha1.Proxy) {
		p.Spec.CloudInit = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "hang-forever"}, Key: "user-data"}
	})
	eventually(t, "a reconcile of hung reaches its deadline", func() bool {
		return controllerMetric(t, "controller_runtime_reconcile_timeouts_total") > timeouts
	})
}

// controllerMetric reads one of controller-runtime's metrics for the proxy
// controller.
func controllerMetric(t *testing.T, name string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "proxy" {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

func TestBoundsDefaults(t *testing.T) {
	if got := (Bounds{}).withDefaults(); got != (Bounds{Workers: 3, Deadline: 30 * time.Second}) {
		t.Errorf("defaults %+v", got)
	}
	set := Bounds{Workers: 8, Deadline: time.Minute}
	if got := set.withDefaults(); got != set {
		t.Errorf("%+v became %+v", set, got)
	}
}

// liveInstances lists the instances of a provider entry carrying uid that
// are not being deleted.
func liveInstances(t *testing.T, provider, uid string) []contract.Instance {
	t.Helper()
	entry, _ := set.Get(provider)
	found, err := entry.Provider.ListByTag(context.Background(), contract.LabelUID, uid)
	if err != nil {
		t.Fatalf("ListByTag: %v", err)
	}
	var live []contract.Instance
	for _, inst := range found {
		if inst.State != contract.StateTerminated {
			live = append(live, inst)
		}
	}
	return live
}
