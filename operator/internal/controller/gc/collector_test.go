package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controllertest"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metrics"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// stubOwner is the owner of the stub entries.
const stubOwner = "c0ffee12-stub"

// stubProvider answers ListByTag with what a test sets and records
// deletes: for the sweeps the reference provider cannot produce (an
// instance without a creation time, a partial list) and a decision table
// that needs exact ages. list is what the entry's owner mark lists,
// legacy what v0.1's mark lists.
type stubProvider struct {
	mu        sync.Mutex
	list      []contract.Instance
	legacy    []contract.Instance
	listErr   error // of the owner's list
	legacyErr error // of v0.1's list
	deleteErr map[string]error
	deleted   []string
}

func (s *stubProvider) Create(context.Context, contract.CreateRequest) (contract.Instance, error) {
	return contract.Instance{}, contract.Permanentf("stub: no Create")
}

func (s *stubProvider) Get(context.Context, string) (contract.Instance, error) {
	return contract.Instance{}, contract.NotFound(errors.New("stub: no Get"))
}

func (s *stubProvider) Delete(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.deleteErr[id]; err != nil {
		return err
	}
	s.deleted = append(s.deleted, id)
	return nil
}

func (s *stubProvider) deletedIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.deleted)
}

func (s *stubProvider) ListByTag(_ context.Context, key, value string) ([]contract.Instance, error) {
	switch {
	case key == contract.LabelManaged && value == stubOwner:
		return slices.Clone(s.list), s.listErr
	case key == contract.LabelManaged && value == contract.LegacyManagedValue:
		return slices.Clone(s.legacy), s.legacyErr
	}
	return nil, fmt.Errorf("stub: the garbage collector lists %s=%s, want the managed mark valued %s or %s", key, value, stubOwner, contract.LegacyManagedValue)
}

// proxyLister is a client.Reader holding a fixed list of Proxies, whose
// status a test writes as it likes (the reconciler would overwrite it on
// the API server).
type proxyLister struct {
	items []v1alpha1.Proxy
	err   error
}

func (l proxyLister) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("proxyLister: no Get")
}

func (l proxyLister) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	if l.err != nil {
		return l.err
	}
	list.(*v1alpha1.ProxyList).Items = slices.Clone(l.items)
	return nil
}

// The garbage collector's decision for each kind of instance: whose it is,
// whether its Proxy still wants it (by providerID, or by name while its
// Create is in flight), how old it is, its state.
func TestGarbageCollectorDecisions(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	const minAge = time.Hour
	old, young := now.Add(-minAge-time.Second), now.Add(-minAge+time.Second)
	owner := func(name, uid, provider string, instance, replacement *v1alpha1.InstanceRef) v1alpha1.Proxy {
		return v1alpha1.Proxy{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Proxy"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: types.UID(uid)},
			Spec:       v1alpha1.ProxySpec{Provider: provider},
			Status:     v1alpha1.ProxyStatus{Instance: instance, Replacement: replacement},
		}
	}
	proxies := []v1alpha1.Proxy{
		owner("gc-serving", "uid-serving", "stub",
			&v1alpha1.InstanceRef{Name: "serving-a", ProviderID: "r/serving-a"},
			&v1alpha1.InstanceRef{Name: "serving-b", ProviderID: "r/serving-b"}),
		owner("gc-pending", "uid-pending", "stub",
			&v1alpha1.InstanceRef{Name: "pending-a"},
			&v1alpha1.InstanceRef{Name: "pending-b"}),
		owner("gc-elsewhere", "uid-elsewhere", "other", nil, nil),
	}
	inst := func(id, uid string, created time.Time, state contract.State) contract.Instance {
		_, name, _ := strings.Cut(id, "/")
		return contract.Instance{ProviderID: id, Name: name, UID: uid, CreatedAt: created, State: state}
	}
	marked := func(i contract.Instance, owner string) contract.Instance {
		i.Owner = owner
		return i
	}
	stub := &stubProvider{
		list: []contract.Instance{
			inst("r/orphan-old", "uid-gone", old, contract.StateRunning),
			inst("r/orphan-at-min-age", "uid-gone", now.Add(-minAge), contract.StateRunning),
			inst("r/orphan-young", "uid-gone", young, contract.StateRunning),
			inst("r/orphan-no-time", "uid-gone", time.Time{}, contract.StateRunning),
			inst("r/orphan-terminated", "uid-gone", old, contract.StateTerminated),
			inst("r/orphan-undeletable", "uid-gone", old, contract.StateStopped),
			inst("r/serving-a", "uid-serving", old, contract.StateRunning),
			inst("r/serving-b", "uid-serving", old, contract.StateProvisioning),
			// Named like the serving instance, but not it: the providerID
			// is recorded, so only the providerID counts.
			inst("r2/serving-a", "uid-serving", old, contract.StateRunning),
			inst("r/pending-a", "uid-pending", old, contract.StateProvisioning),
			inst("r/pending-b", "uid-pending", old, contract.StateProvisioning),
			inst("r/pending-c", "uid-pending", old, contract.StateRunning),
			inst("r/elsewhere", "uid-elsewhere", old, contract.StateRunning),
			// As a provider that reads the managed mark back reports them:
			// this pass's own, and another install's its filter let by.
			marked(inst("r/orphan-marked", "uid-gone", old, contract.StateRunning), stubOwner),
			marked(inst("r/orphan-of-another-install", "uid-gone", old, contract.StateRunning), "d00dfeed-other"),
			// Listed after the one left alone: the sweep goes on past it.
			marked(inst("r/orphan-marked-after", "uid-gone", old, contract.StateRunning), stubOwner),
		},
		deleteErr: map[string]error{"r/orphan-undeletable": errors.New("stub: the backend refused")},
	}
	entry := &providers.Entry{Name: "stub", Type: "stub", Owner: stubOwner, Provider: stub, GC: providers.GC{MinAge: minAge}}
	collector := &Collector{Reader: proxyLister{items: proxies}, Providers: providers.NewSet(entry), Recorder: eventRecorder,
		Now: func() time.Time { return now }}
	metric := func(reason string) float64 {
		return testutil.ToFloat64(metrics.GCDeletions.WithLabelValues("stub", reason, PassOwned))
	}
	before := map[string]float64{}
	for _, reason := range []string{"orphan", "superseded", "wrong-provider"} {
		before[reason] = metric(reason)
	}

	swept, err := collector.Sweep(ctx, entry)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range swept {
		ids = append(ids, d.ProviderID)
	}
	want := []string{"r/orphan-old", "r/orphan-at-min-age", "r2/serving-a", "r/pending-c", "r/elsewhere", "r/orphan-marked", "r/orphan-marked-after"}
	if !slices.Equal(ids, want) || !slices.Equal(stub.deletedIDs(), want) {
		t.Errorf("swept %v, deleted %v; want %v", ids, stub.deletedIDs(), want)
	}
	for reason, n := range map[string]float64{"orphan": 4, "superseded": 2, "wrong-provider": 1} {
		if got := metric(reason) - before[reason]; got != n {
			t.Errorf("gc deletions{%s} grew by %v, want %v", reason, got, n)
		}
	}
	// Each owner that is still there hears of it; an orphan has none.
	for _, p := range []*v1alpha1.Proxy{&proxies[0], &proxies[1], &proxies[2]} {
		controllertest.Eventually(t, "a GarbageCollected event on "+p.Name, func() bool {
			return slices.ContainsFunc(eventsFor(t, p), func(e string) bool { return strings.HasPrefix(e, "GarbageCollected: deleted instance ") })
		})
	}
}

// A sweep that cannot list the instances, or the Proxies, deletes nothing;
// a partial list (list-partial: omit-unreachable) is swept for what it
// holds, and the sweep says it was partial.
func TestGarbageCollectorListFailures(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	orphan := contract.Instance{ProviderID: "r/orphan", Name: "orphan", UID: "uid-gone", CreatedAt: now.Add(-2 * time.Hour), State: contract.StateRunning}
	// v0.1's marks are collected only for a Proxy here that no longer
	// wants the instance: superseded.
	live := v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Name: "live", UID: "uid-live"}, Spec: v1alpha1.ProxySpec{Provider: "stub"},
		Status: v1alpha1.ProxyStatus{Instance: &v1alpha1.InstanceRef{Name: "current", ProviderID: "r/current"}}}
	legacyOrphan := contract.Instance{ProviderID: "r/legacy-superseded", Name: "legacy-superseded", UID: "uid-live", CreatedAt: now.Add(-2 * time.Hour), State: contract.StateRunning}
	sweep := func(listErr, legacyErr, proxiesErr error) ([]string, []contract.Instance, error) {
		stub := &stubProvider{list: []contract.Instance{orphan}, legacy: []contract.Instance{legacyOrphan}, listErr: listErr, legacyErr: legacyErr}
		entry := &providers.Entry{Name: "stub", Type: "stub", Owner: stubOwner, Provider: stub, GC: providers.GC{MinAge: time.Hour}}
		collector := &Collector{Reader: proxyLister{items: []v1alpha1.Proxy{live}, err: proxiesErr}, Providers: providers.NewSet(entry)}
		swept, err := collector.Sweep(ctx, entry)
		return stub.deletedIDs(), swept, err
	}

	unreachable := fmt.Errorf("region r2 unreachable: %w", contract.ErrPartialList)
	deleted, swept, err := sweep(unreachable, nil, nil)
	if !errors.Is(err, contract.ErrPartialList) || len(swept) != 2 || !slices.Equal(deleted, []string{orphan.ProviderID, legacyOrphan.ProviderID}) {
		t.Errorf("partial list: swept %v, deleted %v, error %v; want the listed orphans deleted and the partial list reported", swept, deleted, err)
	}
	// One mark's list failing leaves the other's sweep to go on.
	failed := errors.New("503 unavailable")
	deleted, _, err = sweep(failed, nil, nil)
	if !errors.Is(err, failed) || !slices.Equal(deleted, []string{legacyOrphan.ProviderID}) {
		t.Errorf("the owner's list failed: deleted %v, error %v; want v0.1's orphan deleted and the failure reported", deleted, err)
	}
	deleted, _, err = sweep(nil, failed, nil)
	if !errors.Is(err, failed) || !slices.Equal(deleted, []string{orphan.ProviderID}) {
		t.Errorf("v0.1's list failed: deleted %v, error %v; want the owner's orphan deleted and the failure reported", deleted, err)
	}
	for what, errs := range map[string][3]error{
		"both marks' instances": {failed, failed, nil},
		"the Proxies":           {nil, nil, errors.New("the API server is away")},
	} {
		deleted, swept, err := sweep(errs[0], errs[1], errs[2])
		if err == nil || len(swept) != 0 || len(deleted) != 0 {
			t.Errorf("listing %s failed: swept %v, deleted %v, error %v; want nothing deleted and the error", what, swept, deleted, err)
		}
	}
}

// An instance with v0.1's marks goes only when its Proxy is here, names
// this entry and does not want it: one of no Proxy here may be another
// install's, and one of a Proxy on another entry is that entry's to judge.
func TestLegacyInstancesOnlyOfAProxyHere(t *testing.T) {
	old := time.Now().Add(-2 * time.Hour)
	proxies := []v1alpha1.Proxy{
		{ObjectMeta: metav1.ObjectMeta{Name: "live", UID: "uid-live"}, Spec: v1alpha1.ProxySpec{Provider: "stub"},
			Status: v1alpha1.ProxyStatus{Instance: &v1alpha1.InstanceRef{Name: "current", ProviderID: "r/current"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", UID: "uid-elsewhere"}, Spec: v1alpha1.ProxySpec{Provider: "other"}},
	}
	stub := &stubProvider{legacy: []contract.Instance{
		{ProviderID: "r/of-no-proxy-here", Name: "of-no-proxy-here", UID: "uid-gone", CreatedAt: old, State: contract.StateRunning},
		{ProviderID: "r/of-another-entry", Name: "of-another-entry", UID: "uid-elsewhere", CreatedAt: old, State: contract.StateRunning},
		{ProviderID: "r/current", Name: "current", UID: "uid-live", CreatedAt: old, State: contract.StateRunning},
		{ProviderID: "r/superseded", Name: "superseded", UID: "uid-live", CreatedAt: old, State: contract.StateRunning},
	}}
	entry := &providers.Entry{Name: "stub", Type: "stub", Owner: stubOwner, Provider: stub, GC: providers.GC{MinAge: time.Hour}}
	collector := &Collector{Reader: proxyLister{items: proxies}, Providers: providers.NewSet(entry)}
	if _, err := collector.Sweep(context.Background(), entry); err != nil {
		t.Fatal(err)
	}
	if got := stub.deletedIDs(); !slices.Equal(got, []string{"r/superseded"}) {
		t.Errorf("deleted %v of v0.1's instances, want only the superseded one of a Proxy here", got)
	}
}

// failingDeletes is the Collector's Addresses writer with the Delete of
// the named objects failing.
type failingDeletes struct {
	client.Writer
	fail map[string]bool
}

func (f failingDeletes) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if f.fail[obj.GetName()] {
		return errors.New("stub: the API server refused the delete")
	}
	return f.Writer.Delete(ctx, obj, opts...)
}

// Of the addresses on complete lists, the GC releases exactly those of a
// Proxy that is gone and that no listed instance holds, on this entry; a
// release that fails is logged and the others go on.
func TestOrphanAddressesReleasedAndKept(t *testing.T) {
	ctx := context.Background()
	live := &v1alpha1.Proxy{
		ObjectMeta: metav1.ObjectMeta{Name: "gc-addr-live", Namespace: testNamespace},
		Spec: v1alpha1.ProxySpec{Provider: "gc-addrs", AllowedClients: []v1alpha1.CIDR{"10.0.0.0/8"},
			Placement: v1alpha1.Placement{Region: "r", MachineType: "m", Image: "i"}},
	}
	if err := k8s.Create(ctx, live); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.WithoutCancel(ctx), live) })
	address := func(name, provider string, host int, proxy v1alpha1.ProxyRef) *v1alpha1.ProxyAddress {
		pa := &v1alpha1.ProxyAddress{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       v1alpha1.ProxyAddressSpec{Pool: "pool", Provider: provider, Address: fmt.Sprintf("198.51.100.%d/24", host), Gateway: "198.51.100.1", Proxy: proxy},
		}
		if err := k8s.Create(ctx, pa); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.WithoutCancel(ctx), pa) })
		return pa
	}
	gone := func(uid string) v1alpha1.ProxyRef {
		return v1alpha1.ProxyRef{Namespace: testNamespace, Name: "gone-" + uid, UID: uid}
	}
	// Listed by name: each kept address comes before a released one, so a
	// sweep that stopped at the first kept would release none.
	addrs := []*v1alpha1.ProxyAddress{
		address("gc-addrs-a-other-entry", "other", 10, gone("uid-a")),
		address("gc-addrs-b-live", "gc-addrs", 11, v1alpha1.ProxyRef{Namespace: testNamespace, Name: live.Name, UID: string(live.UID)}),
		address("gc-addrs-c-held", "gc-addrs", 12, gone("uid-held")),
		address("gc-addrs-d-refused", "gc-addrs", 13, gone("uid-d")),
		address("gc-addrs-e-orphan", "gc-addrs", 14, gone("uid-e")),
	}
	// A young instance of the gone Proxy still holds its address.
	stub := &stubProvider{list: []contract.Instance{{ProviderID: "r/held", Name: "held", UID: "uid-held", CreatedAt: time.Now(), State: contract.StateRunning}}}
	entry := &providers.Entry{Name: "gc-addrs", Type: "stub", Owner: stubOwner, Provider: stub, GC: providers.GC{MinAge: time.Hour}}
	collector := &Collector{Reader: k8s, Addresses: failingDeletes{Writer: k8s, fail: map[string]bool{"gc-addrs-d-refused": true}}, Providers: providers.NewSet(entry)}
	if _, err := collector.Sweep(ctx, entry); err != nil {
		t.Fatal(err)
	}
	for _, pa := range addrs {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(pa), &v1alpha1.ProxyAddress{})
		released := apierrors.IsNotFound(err)
		if want := pa.Name == "gc-addrs-e-orphan"; released != want {
			t.Errorf("%s: released %v (Get: %v), want %v", pa.Name, released, err, want)
		}
	}
	if logLines("releasing an orphaned address failed", "gc-addrs-d-refused") != 1 ||
		logLines("released the address of a Proxy that is gone", "gc-addrs-e-orphan") != 1 ||
		logLines("released the address of a Proxy that is gone", "gc-addrs-d-refused") != 0 {
		t.Errorf("the release and the failed one are not logged as such:\n%s", logs)
	}
}

// The address of a Proxy that is gone is released only when the lists
// prove no VM holds it: every list complete, the owner's and v0.1's.
func TestOrphanAddressReleasedOnlyOnCompleteLists(t *testing.T) {
	ctx := context.Background()
	partial := fmt.Errorf("region r2 unreachable: %w", contract.ErrPartialList)
	for _, tc := range []struct {
		name               string
		listErr, legacyErr error
		released           bool
	}{
		{"complete lists", nil, nil, true},
		{"the owner's list partial", partial, nil, false},
		{"v0.1's list partial", nil, partial, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pa := &v1alpha1.ProxyAddress{
				ObjectMeta: metav1.ObjectMeta{Name: "gc-orphan-198-51-100-77"},
				Spec: v1alpha1.ProxyAddressSpec{Pool: "pool", Provider: "gc-addr", Address: "198.51.100.77/24", Gateway: "198.51.100.1",
					Proxy: v1alpha1.ProxyRef{Namespace: testNamespace, Name: "gone", UID: "uid-gone"}},
			}
			if err := k8s.Create(ctx, pa); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k8s.Delete(context.WithoutCancel(ctx), pa) })
			stub := &stubProvider{listErr: tc.listErr, legacyErr: tc.legacyErr}
			entry := &providers.Entry{Name: "gc-addr", Type: "stub", Owner: stubOwner, Provider: stub, GC: providers.GC{MinAge: time.Hour}}
			collector := &Collector{Reader: k8s, Addresses: k8s, Providers: providers.NewSet(entry)}
			if _, err := collector.Sweep(ctx, entry); (err != nil) != (tc.listErr != nil || tc.legacyErr != nil) {
				t.Fatalf("Sweep: %v", err)
			}
			err := k8s.Get(ctx, client.ObjectKeyFromObject(pa), &v1alpha1.ProxyAddress{})
			if released := apierrors.IsNotFound(err); released != tc.released {
				t.Errorf("released %v (Get: %v), want %v", released, err, tc.released)
			}
		})
	}
}

// Start sweeps every provider at once and on its interval, logs a failed
// sweep naming its provider (and only a failed one), and returns when ctx
// ends.
func TestGarbageCollectorStart(t *testing.T) {
	old := contract.Instance{ProviderID: "r/orphan", Name: "orphan", UID: "uid-gone", CreatedAt: time.Now().Add(-2 * time.Hour), State: contract.StateRunning}
	fine := &stubProvider{list: []contract.Instance{old}}
	broken := &stubProvider{listErr: errors.New("stub: 503 unavailable")}
	set := providers.NewSet(
		&providers.Entry{Name: "gc-fine", Type: "stub", Owner: stubOwner, Provider: fine, GC: providers.GC{MinAge: time.Hour, Interval: 20 * time.Millisecond}},
		&providers.Entry{Name: "gc-broken", Type: "stub", Owner: stubOwner, Provider: broken, GC: providers.GC{MinAge: time.Hour, Interval: 20 * time.Millisecond}},
	)
	collector := &Collector{Reader: proxyLister{}, Providers: set}
	if !collector.NeedLeaderElection() {
		t.Error("the garbage collector runs on every replica; want the leader only")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- collector.Start(ctx) }()
	controllertest.Eventually(t, "the orphan is swept, twice (the backend keeps listing it)", func() bool { return len(fine.deletedIDs()) >= 2 })
	failed := `"msg"="garbage collection sweep failed"`
	controllertest.Eventually(t, "the failed sweep is logged", func() bool { return logLines(failed, `"provider"="gc-broken"`) > 0 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return after its context ended")
	}
	if n := logLines(failed, `"provider"="gc-fine"`); n > 0 {
		t.Errorf("%d sweep failures logged for the provider whose sweeps succeed", n)
	}
}

// Each sweep is counted for an alert: a failed one (a list that failed or
// was partial) in egressproxies_gc_sweep_failures_total, a complete one as
// egressproxies_gc_last_success_timestamp_seconds.
func TestGarbageCollectorSweepMetrics(t *testing.T) {
	ctx := context.Background()
	stub := &stubProvider{}
	entry := &providers.Entry{Name: "swept", Type: "stub", Owner: stubOwner, Provider: stub, GC: providers.GC{MinAge: time.Hour}}
	collector := &Collector{Reader: proxyLister{}, Providers: providers.NewSet(entry)}
	failures := func() float64 { return testutil.ToFloat64(metrics.GCSweepFailures.WithLabelValues("swept")) }
	last := func() float64 { return testutil.ToFloat64(metrics.GCLastSuccess.WithLabelValues("swept")) }
	before := time.Now()
	if _, err := collector.Sweep(ctx, entry); err != nil {
		t.Fatal(err)
	}
	if got := last(); got < float64(before.Unix()) || failures() != 0 {
		t.Errorf("after a complete sweep: last success %v (want at least %d), failures %v (want 0)", got, before.Unix(), failures())
	}
	succeeded := last()
	stub.listErr = fmt.Errorf("region r2 unreachable: %w", contract.ErrPartialList)
	if _, err := collector.Sweep(ctx, entry); err == nil {
		t.Fatal("a sweep over a partial list reported no error")
	}
	if failures() != 1 || last() != succeeded {
		t.Errorf("after a partial sweep: failures %v (want 1), last success %v (want %v, unchanged)", failures(), last(), succeeded)
	}
}

// stubKeeper is a stubProvider that keeps egress addresses (contract
// §3.1), and records what it releases.
type stubKeeper struct {
	*stubProvider
	kept     []contract.Egress
	listErr  error
	released []contract.Egress
}

func (s *stubKeeper) KeepsEgress() bool { return true }
func (s *stubKeeper) ListEgress(_ context.Context, owner string) ([]contract.Egress, error) {
	if owner != stubOwner {
		return nil, fmt.Errorf("stub: the garbage collector lists the egress of %s, want %s", owner, stubOwner)
	}
	return slices.Clone(s.kept), s.listErr
}
func (s *stubKeeper) ReleaseEgress(_ context.Context, e contract.Egress) error {
	s.released = append(s.released, e)
	return nil
}

// An egress address the entry keeps for a Proxy that is gone, or that
// moved to another entry, is released once no instance of the entry
// carries that Proxy's UID; one of a Proxy of the entry, or still held by
// an instance, is kept; nothing is released when a list failed.
func TestOrphanEgressReleasedAndKept(t *testing.T) {
	ctx := context.Background()
	proxy := func(name, provider string) *v1alpha1.Proxy {
		p := &v1alpha1.Proxy{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
			Spec: v1alpha1.ProxySpec{Provider: provider, AllowedClients: []v1alpha1.CIDR{"10.0.0.0/8"},
				Placement: v1alpha1.Placement{Region: "r", MachineType: "m", Image: "i"}},
		}
		if err := k8s.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.WithoutCancel(ctx), p) })
		return p
	}
	live, moved := proxy("gc-egress-live", "gc-egress"), proxy("gc-egress-moved", "elsewhere")
	egress := func(uid string, ip string) contract.Egress {
		return contract.Egress{Region: "r", UID: uid, Replica: 0, Owner: stubOwner, IP: ip}
	}
	kept := []contract.Egress{
		egress(string(live.UID), "203.0.113.1"),
		egress("uid-held", "203.0.113.2"),
		egress("uid-gone", "203.0.113.3"),
		egress(string(moved.UID), "203.0.113.4"),
	}
	held := contract.Instance{ProviderID: "r/held", Name: "held", UID: "uid-held", CreatedAt: time.Now(), State: contract.StateRunning}
	for _, listErr := range []error{nil, errors.New("the network service is unavailable")} {
		stub := &stubKeeper{stubProvider: &stubProvider{list: []contract.Instance{held}}, kept: kept, listErr: listErr}
		entry := &providers.Entry{Name: "gc-egress", Type: "stub", Owner: stubOwner, Provider: stub, GC: providers.GC{MinAge: time.Hour}}
		collector := &Collector{Reader: k8s, Providers: providers.NewSet(entry)}
		_, err := collector.Sweep(ctx, entry)
		var ips []string
		for _, e := range stub.released {
			ips = append(ips, e.IP)
		}
		want := []string{"203.0.113.3", "203.0.113.4"}
		if listErr != nil {
			want = nil
		}
		if !slices.Equal(ips, want) || (err != nil) != (listErr != nil) {
			t.Errorf("ListEgress error %v: released %q, Sweep = %v; want %q released", listErr, ips, err, want)
		}
	}
	if logLines("released the egress address of a Proxy that is gone", "203.0.113.3") != 1 {
		t.Errorf("the release is not logged:\n%s", logs)
	}
}
