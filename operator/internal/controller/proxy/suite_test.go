package proxy

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest/memprovider"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller/addresspool"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controllertest"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/endpoints"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/probe"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/probe/probetest"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// The suite runs the operator's reconciler in a manager against a real
// kube-apiserver and etcd (envtest, built by hack/control-plane.sh), with
// the reference provider over an in-memory Cloud as the backend and a
// local TCP listener standing in for every proxy's port.

const (
	testProvider  = "mem"
	testOwner     = "c0ffee12-" + testProvider
	testToken     = "sentinel-credential-5e1f0c"
	testNamespace = "default"
)

var (
	k8s      client.Client
	cloud    *memprovider.Cloud
	control  memprovider.Control
	set      *providers.Set
	logs     *controllertest.Logs
	spans    = tracetest.NewSpanRecorder()
	proxyUp  atomic.Bool // whether the stand-in proxy answers
	guestIPs atomic.Int32
	holder   = &createHolder{}
	stopped  sync.Map // providerIDs the test provider reports Stopped
	// cutOff holds providerIDs whose Delete was cut off after it began:
	// the test provider reports them Terminated until a Delete completes
	// them, as vSphere does for a VM its Delete marked and powered off
	// (providers/vsphere deleting.go: for up to taskTimeout+callTimeout).
	cutOff sync.Map
	// misreported maps providerIDs to the IP the test provider reports for
	// them when Running: a provider breaking contract §2.2.
	misreported sync.Map
	// createPanics holds Proxy names whose instances' Creates panic in
	// the test provider (panics_test.go).
	createPanics sync.Map
	// eventRecorder is the manager's event recorder, for the runnables a test
	// drives by hand.
	eventRecorder recorder.EventRecorder
	// mgrCache is the manager's cache: what the reconciler reads.
	mgrCache cache.Cache
	// secretCut stands between the reconciler's uncached reader and the
	// API server, and fails the reads of the Secrets a test cuts.
	secretCut *apiCut
	// standIn is the stand-in proxy's listener, for the reconcilers a test
	// runs besides the suite's.
	standIn net.Listener
	// restConfig and testScheme reach the suite's API server, for the
	// managers a test runs besides the suite's.
	restConfig *rest.Config
	testScheme *runtime.Scheme
	// createRequests holds the last CreateRequest of each instance name.
	createRequests sync.Map
	// deleteGate, when it holds a channel, makes every Delete wait until
	// that channel closes.
	deleteGate atomic.Pointer[chan struct{}]
	// gatedDeletes counts the Deletes that met a deleteGate.
	gatedDeletes atomic.Int32
	// failingProbes is how many of the next probes the stand-in proxy
	// leaves unanswered, whatever proxyUp says.
	failingProbes atomic.Int32
	// probesAnswered counts the probes the stand-in proxy answered.
	probesAnswered atomic.Int64
	// deletedAt holds when each providerID's first Delete reached the
	// provider (a time.Time).
	deletedAt sync.Map
	// reconciles counts the reconciles of each Proxy by name (an
	// *atomic.Int64): each begins by reading its Proxy.
	reconciles sync.Map
)

// suitePoll is the suite's Timing.Poll: a VM not ready yet is read again
// after it.
const suitePoll = 100 * time.Millisecond

// suiteResync is the suite's Timing.Resync: a Ready Proxy's check period.
const suiteResync = 300 * time.Millisecond

// testZonePrefix starts the zones the test provider accepts (and drops).
const testZonePrefix = "test-zone-"

func TestMain(m *testing.M) {
	logs = controllertest.CaptureLogs()
	controllertest.Main(m, run)
}

func run(m *testing.M, cfg *rest.Config) int {
	scheme := controllertest.Scheme()
	restConfig, testScheme = cfg, scheme
	var err error
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	cloud = memprovider.NewCloud(testToken, []string{"r1"}, []string{"debian-12-proxy"}, 50*time.Millisecond)
	control = memprovider.Control{Cloud: cloud}
	prov, err := memprovider.New(memprovider.Config{
		Token: testToken, Regions: []string{"r1"},
		MachineTypes: map[string]memprovider.MachineType{"small": {CPUs: 1, MemoryMiB: 512}},
		Images:       map[string]string{"debian-12": "debian-12-proxy"},
		CallTimeout:  2 * time.Second,
	}, cloud)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	slow, err := slowEntry(tp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	keeps, err := egressEntry(tp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	set = providers.NewSet(&providers.Entry{
		Name: testProvider, Type: memprovider.Type, Owner: testOwner,
		Provider:      providers.Instrument(testProvider, memprovider.Type, providers.Limit(&seamProvider{Provider: prov, holder: holder}, providers.Limits{QPS: 1000, Burst: 1000, Concurrency: 8}), tp),
		GC:            providers.GC{MinAge: time.Hour, Interval: time.Hour},
		CheckInterval: time.Hour,
	}, slow, tenantEntry(prov, tp), keeps)

	listener, err := probetest.StandIn(func() bool {
		if failingProbes.Load() > 0 && failingProbes.Add(-1) >= 0 {
			return false
		}
		up := proxyUp.Load()
		if up {
			probesAnswered.Add(1)
		}
		return up
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = listener.Close() }()
	standIn = listener
	proxyUp.Store(true)

	mgr, err := controllertest.NewManager(cfg, ctrl.Options{Scheme: scheme, Cache: endpoints.CacheOptions()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	eventRecorder = mgr.GetEventRecorder("egress-proxies-operator")
	mgrCache = mgr.GetCache()
	cut, cutConfig, err := startAPICut(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cut.close()
	secretCut = cut
	apiReader, err := client.New(cutConfig, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := (&Reconciler{
		Client: countingReads{mgr.GetClient()}, APIReader: hangingSecrets{apiReader}, Scheme: scheme, Recorder: eventRecorder,
		Providers: set, DefaultAllowedClients: []string{"10.0.0.0/8"},
		// Every VM's address leads to the local stand-in: the probe runs
		// for real, over loopback only.
		Prober: probe.HTTPProxy{Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, listener.Addr().String())
		}, Timeout: time.Second},
		Timing: Timing{Poll: suitePoll, Resync: suiteResync, QuotaBackoff: time.Second, PermanentRetry: 2 * time.Second,
			Drain: testDrain},
		Bounds: Bounds{Deadline: testDeadline},
		Tracer: tp,
	}).SetupWithManager(context.Background(), mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := (&addresspool.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer controllertest.Start(mgr, func(err error) { fmt.Fprintln(os.Stderr, "manager:", err) })()
	return m.Run()
}

// seamProvider is the reference provider with two seams the memory Cloud's
// control lacks: a test can hold a Create after the backend made the VM and
// before the operator hears of it (holdCreates: the window a crash between
// Create and the status write leaves), and have a running VM reported
// Stopped until it is deleted (stopVM: a VM someone powered off).
type seamProvider struct {
	*memprovider.Provider
	holder *createHolder
}

func (p *seamProvider) Create(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
	createRequests.Store(req.Name, req)
	createPanics.Range(func(proxy, _ any) bool {
		if strings.HasPrefix(req.Name, proxy.(string)+"-") {
			panic("runtime error: invalid memory address or nil pointer dereference (the test provider's Create)")
		}
		return true
	})
	if strings.HasPrefix(req.Placement.Zone, testZonePrefix) {
		// The memory provider has no zones: these stand for a backend's,
		// and the test reads them from createRequests.
		req.Placement.Zone = ""
	}
	inst, err := p.Provider.Create(ctx, req)
	if err != nil {
		return inst, err
	}
	inst.CreatedAt = subSecond(inst.CreatedAt)
	return inst, p.holder.wait(ctx, req.Name, inst)
}

// subSecond gives a creation time the fraction of a second a real
// backend's carries (vSphere's config.createDate is an xsd:dateTime with
// sub-second digits; the memory cloud keeps whole seconds), the same on
// every read. The API server stores status times in whole seconds.
func subSecond(t time.Time) time.Time {
	if t.IsZero() || t.Nanosecond() != 0 {
		return t
	}
	return t.Add(123456789 * time.Nanosecond)
}

func (p *seamProvider) Get(ctx context.Context, providerID string) (contract.Instance, error) {
	inst, err := p.Provider.Get(ctx, providerID)
	inst.CreatedAt = subSecond(inst.CreatedAt)
	if _, ok := cutOff.Load(providerID); ok && err == nil {
		inst.State = contract.StateTerminated
	}
	if _, ok := stopped.Load(providerID); ok && err == nil && inst.State == contract.StateRunning {
		inst.State = contract.StateStopped
	}
	if ip, ok := misreported.Load(providerID); ok && err == nil && inst.State == contract.StateRunning {
		inst.IP = ip.(string)
	}
	return inst, err
}

func (p *seamProvider) Delete(ctx context.Context, providerID string) error {
	deletedAt.LoadOrStore(providerID, time.Now())
	if gate := deleteGate.Load(); gate != nil {
		gatedDeletes.Add(1)
		select {
		case <-*gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := p.Provider.Delete(ctx, providerID)
	if err == nil {
		stopped.Delete(providerID)
		cutOff.Delete(providerID)
	}
	return err
}

func (p *seamProvider) ListByTag(ctx context.Context, key, value string) ([]contract.Instance, error) {
	found, err := p.Provider.ListByTag(ctx, key, value)
	for i := range found {
		if _, ok := cutOff.Load(found[i].ProviderID); ok {
			found[i].State = contract.StateTerminated
		}
	}
	return found, err
}

// cutOffDelete has the test provider report the instance as a Delete cut
// off after it began leaves it: Terminated until a Delete completes it.
func cutOffDelete(t *testing.T, providerID string) {
	t.Helper()
	cutOff.Store(providerID, true)
	t.Cleanup(func() { cutOff.Delete(providerID) })
}

// stopVM has the test provider report the VM Stopped until it is deleted.
func stopVM(t *testing.T, providerID string) {
	t.Helper()
	stopped.Store(providerID, true)
	t.Cleanup(func() { stopped.Delete(providerID) })
}

// countingReads is the reconciler's client, counting its reads of each
// Proxy: the reconciles (reconciles).
type countingReads struct{ client.Client }

func (c countingReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*v1alpha1.Proxy); ok {
		n, _ := reconciles.LoadOrStore(key.Name, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// createHolder holds the Creates of instances whose names start with a
// prefix, one hold at a time.
type createHolder struct {
	mu   sync.Mutex
	hold *heldCreates
}

type heldCreates struct {
	prefix   string
	held     chan contract.Instance
	released chan struct{}
	err      error // what a held Create returns; set before released closes
}

// holdCreates makes every Create of an instance named prefix* wait, once
// the VM exists, until release is called with what Create should return
// (nil: the instance; an error: the answer was lost on the way). held
// receives each instance as its Create is held.
func holdCreates(t *testing.T, prefix string) (held <-chan contract.Instance, release func(error)) {
	t.Helper()
	holder.mu.Lock()
	defer holder.mu.Unlock()
	if holder.hold != nil {
		t.Fatalf("Creates of %s* are held already", holder.hold.prefix)
	}
	h := &heldCreates{prefix: prefix, held: make(chan contract.Instance, 16), released: make(chan struct{})}
	holder.hold = h
	var once sync.Once
	release = func(err error) {
		once.Do(func() {
			holder.mu.Lock()
			holder.hold = nil
			holder.mu.Unlock()
			h.err = err
			close(h.released)
		})
	}
	t.Cleanup(func() { release(nil) })
	return h.held, release
}

// heldCreate waits for the next Create holdCreates holds, at most 30 s;
// what says which, for the failure.
func heldCreate(t *testing.T, held <-chan contract.Instance, what string) contract.Instance {
	t.Helper()
	select {
	case inst := <-held:
		return inst
	case <-time.After(30 * time.Second):
		t.Fatal(what)
		return contract.Instance{}
	}
}

// narrowHold holds, from now on, only the Creates of instances named
// prefix* among those holdCreates holds; the Creates held already stay
// held until release.
func narrowHold(prefix string) {
	holder.mu.Lock()
	defer holder.mu.Unlock()
	holder.hold.prefix = prefix
}

func (c *createHolder) wait(ctx context.Context, name string, inst contract.Instance) error {
	c.mu.Lock()
	h := c.hold
	holds := h != nil && strings.HasPrefix(name, h.prefix)
	c.mu.Unlock()
	if !holds {
		return nil
	}
	h.held <- inst
	select {
	case <-h.released:
		return h.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newProxy creates a Proxy on the test provider; mutate adjusts its spec.
func newProxy(t *testing.T, name string, mutate func(*v1alpha1.Proxy)) *v1alpha1.Proxy {
	t.Helper()
	p := &v1alpha1.Proxy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
		Spec: v1alpha1.ProxySpec{
			Provider:  testProvider,
			Placement: v1alpha1.Placement{Region: "r1", MachineType: "small", Image: "debian-12"},
			Port:      3128,
		},
	}
	if mutate != nil {
		mutate(p)
	}
	if err := k8s.Create(context.Background(), p); err != nil {
		t.Fatalf("create Proxy %s: %v", name, err)
	}
	t.Cleanup(func() { deleteProxy(t, p) })
	return p
}

// deleteProxy deletes p and waits until the finalizer let it go.
func deleteProxy(t *testing.T, p *v1alpha1.Proxy) {
	t.Helper()
	_ = k8s.Delete(context.Background(), p)
	eventually(t, "Proxy "+p.Name+" is gone", func() bool {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(p), &v1alpha1.Proxy{})
		return client.IgnoreNotFound(err) == nil && err != nil
	})
	collectOwned(t, p)
}

// updateSpec changes the Proxy's spec as a user would, on the latest copy:
// the operator writes the status in between, and a stale copy conflicts.
func updateSpec(t *testing.T, p *v1alpha1.Proxy, mutate func(*v1alpha1.Proxy)) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := get(t, p)
		mutate(got)
		return k8s.Update(context.Background(), got)
	}); err != nil {
		t.Fatal(err)
	}
}

// get returns the Proxy's current state.
func get(t *testing.T, p *v1alpha1.Proxy) *v1alpha1.Proxy {
	t.Helper()
	var out v1alpha1.Proxy
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(p), &out); err != nil {
		t.Fatalf("get Proxy %s: %v", p.Name, err)
	}
	return &out
}

// logLines counts the operator's log lines holding every one of parts.
func logLines(parts ...string) int { return logs.Count(parts...) }

// eventually polls cond for up to 20 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	controllertest.Eventually(t, what, cond)
}

// bootGuest waits for ref's instance to exist and plays its guest
// reporting a fresh address; it returns the address.
func bootGuest(t *testing.T, p *v1alpha1.Proxy, ref func(*v1alpha1.ProxyStatus) *v1alpha1.InstanceRef) string {
	t.Helper()
	return bootGuestOn(t, control, p, ref)
}

// bootGuestOn is bootGuest on the backend c controls.
func bootGuestOn(t *testing.T, c memprovider.Control, p *v1alpha1.Proxy, ref func(*v1alpha1.ProxyStatus) *v1alpha1.InstanceRef) string {
	t.Helper()
	var id string
	eventually(t, "the instance of "+p.Name+" is created", func() bool {
		if r := ref(&get(t, p).Status); r != nil && r.ProviderID != "" {
			id = r.ProviderID
			return true
		}
		return false
	})
	ip := fmt.Sprintf("192.0.2.%d", guestIPs.Add(1))
	if err := c.ReportIP(context.Background(), id, ip); err != nil {
		t.Fatalf("report IP: %v", err)
	}
	return ip
}

// bootGuestAt is bootGuest reporting the address ip: a Proxy's allocated
// one.
func bootGuestAt(t *testing.T, p *v1alpha1.Proxy, ref func(*v1alpha1.ProxyStatus) *v1alpha1.InstanceRef, ip string) {
	t.Helper()
	var id string
	eventually(t, "the instance of "+p.Name+" is created", func() bool {
		if r := ref(&get(t, p).Status); r != nil && r.ProviderID != "" {
			id = r.ProviderID
			return true
		}
		return false
	})
	if err := control.ReportIP(context.Background(), id, ip); err != nil {
		t.Fatalf("report IP: %v", err)
	}
}

func current(s *v1alpha1.ProxyStatus) *v1alpha1.InstanceRef     { return s.Instance }
func replacement(s *v1alpha1.ProxyStatus) *v1alpha1.InstanceRef { return s.Replacement }

// waitReady waits until the Proxy is Ready.
func waitReady(t *testing.T, p *v1alpha1.Proxy) *v1alpha1.Proxy {
	t.Helper()
	var got *v1alpha1.Proxy
	eventually(t, p.Name+" is Ready", func() bool {
		got = get(t, p)
		return got.Status.Phase == v1alpha1.PhaseReady
	})
	return got
}

// holdDeletes holds every provider Delete until the returned func is
// called (again at the test's end, if it was not; a second call does
// nothing), and counts the held ones from zero in gatedDeletes.
func holdDeletes(t *testing.T) (open func()) {
	t.Helper()
	gate := make(chan struct{})
	gatedDeletes.Store(0)
	deleteGate.Store(&gate)
	var once sync.Once
	open = func() {
		once.Do(func() {
			deleteGate.Store(nil)
			close(gate)
		})
	}
	t.Cleanup(open)
	return open
}

// proxyCondition returns the Proxy's condition of the type, or the zero
// condition when it has none.
func proxyCondition(p *v1alpha1.Proxy, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(p.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// readyCondition returns the Proxy's Ready condition.
func readyCondition(p *v1alpha1.Proxy) metav1.Condition {
	return proxyCondition(p, v1alpha1.ConditionReady)
}

// instancesOf lists the test provider's live instances carrying the
// Proxy's UID.
func instancesOf(t *testing.T, p *v1alpha1.Proxy) []contract.Instance {
	t.Helper()
	return liveInstances(t, testProvider, string(get(t, p).UID))
}

// eventsFor returns the notes of every event regarding the Proxy.
func eventsFor(t *testing.T, p *v1alpha1.Proxy) []string {
	t.Helper()
	return eventsIn(t, k8s, p)
}

// eventsIn returns the notes of every event regarding the Proxy that c's
// API server holds.
func eventsIn(t *testing.T, c client.Client, p *v1alpha1.Proxy) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := c.List(context.Background(), &list, client.InNamespace(p.Namespace)); err != nil {
		t.Fatalf("list events: %v", err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == p.Name && e.Regarding.Kind == "Proxy" {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

// leader is an Elected channel already closed: the suite's collectors
// run as the leader's.
func leader() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
