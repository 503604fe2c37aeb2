package proxy

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// The phase in one word, from the conditions, the error and the instances;
// the first row that applies wins.
func TestPhaseOf(t *testing.T) {
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReady}
	notReady := func(reason string) metav1.Condition {
		return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason}
	}
	provisioned := metav1.Condition{Type: v1alpha1.ConditionProvisioned, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonProviderNotConfigured}
	created := &v1alpha1.InstanceRef{Name: "a", ProviderID: "r1/a"}
	pending := &v1alpha1.InstanceRef{Name: "a"}
	lastError := func(class contract.Class) *v1alpha1.LastError { return &v1alpha1.LastError{Class: string(class)} }
	now := metav1.Now()
	for _, tc := range []struct {
		name     string
		deleting bool
		status   v1alpha1.ProxyStatus
		want     v1alpha1.ProxyPhase
	}{
		{"new", false, v1alpha1.ProxyStatus{}, v1alpha1.PhasePending},
		{"creating", false, v1alpha1.ProxyStatus{Instance: pending}, v1alpha1.PhasePending},
		{"created", false, v1alpha1.ProxyStatus{Instance: created, Conditions: []metav1.Condition{notReady(v1alpha1.ReasonProvisioning)}}, v1alpha1.PhaseProvisioning},
		{"ready", false, v1alpha1.ProxyStatus{Instance: created, Conditions: []metav1.Condition{ready}}, v1alpha1.PhaseReady},
		{"ready, replacing", false, v1alpha1.ProxyStatus{Instance: created, Replacement: pending, Conditions: []metav1.Condition{ready}}, v1alpha1.PhaseReplacing},
		{"replacement failing for good", false, v1alpha1.ProxyStatus{Instance: created, Replacement: pending, Conditions: []metav1.Condition{ready}, LastError: lastError(contract.ClassPermanent)}, v1alpha1.PhaseReplacing},
		{"not ready with a replacement", false, v1alpha1.ProxyStatus{Instance: created, Replacement: pending, Conditions: []metav1.Condition{notReady(v1alpha1.ReasonProxyUnreachable)}}, v1alpha1.PhaseProvisioning},
		{"permanent error", false, v1alpha1.ProxyStatus{Instance: created, LastError: lastError(contract.ClassPermanent), Conditions: []metav1.Condition{notReady(v1alpha1.ReasonProviderError)}}, v1alpha1.PhaseFailed},
		{"permanent error before any VM", false, v1alpha1.ProxyStatus{Instance: pending, LastError: lastError(contract.ClassPermanent)}, v1alpha1.PhaseFailed},
		{"transient error", false, v1alpha1.ProxyStatus{Instance: created, LastError: lastError(contract.ClassTransient), Conditions: []metav1.Condition{notReady(v1alpha1.ReasonBackendUnavailable)}}, v1alpha1.PhaseProvisioning},
		{"quota", false, v1alpha1.ProxyStatus{Instance: pending, LastError: lastError(contract.ClassQuota), Conditions: []metav1.Condition{notReady(v1alpha1.ReasonQuotaExceeded)}}, v1alpha1.PhasePending},
		{"provider not configured", false, v1alpha1.ProxyStatus{Instance: created, Conditions: []metav1.Condition{notReady(v1alpha1.ReasonProviderNotConfigured)}}, v1alpha1.PhaseFailed},
		{"not configured, on another condition only", false, v1alpha1.ProxyStatus{Instance: created, Conditions: []metav1.Condition{provisioned, notReady(v1alpha1.ReasonProvisioning)}}, v1alpha1.PhaseProvisioning},
		{"deleting", true, v1alpha1.ProxyStatus{Instance: created, Conditions: []metav1.Condition{ready}}, v1alpha1.PhaseDeleting},
		{"deleting a failed one", true, v1alpha1.ProxyStatus{LastError: lastError(contract.ClassPermanent)}, v1alpha1.PhaseDeleting},
	} {
		p := &v1alpha1.Proxy{Status: tc.status}
		if tc.deleting {
			p.DeletionTimestamp = &now
		}
		if got := replica.Phase(p); got != tc.want {
			t.Errorf("%s: phase %s, want %s", tc.name, got, tc.want)
		}
	}
}

// statusClient is a client whose status patches are counted and kept,
// and fail as a test says. Any other call panics.
type statusClient struct {
	client.Client
	patches  []string
	patchErr error // what each patch returns
}

func (c *statusClient) Status() client.SubResourceWriter { return statusWriter{c: c} }

type statusWriter struct {
	client.SubResourceWriter
	c *statusClient
}

func (w statusWriter) Patch(_ context.Context, obj client.Object, patch client.Patch, _ ...client.SubResourcePatchOption) error {
	data, err := patch.Data(obj)
	w.c.patches = append(w.c.patches, string(data))
	if err != nil {
		return err
	}
	return w.c.patchErr
}

// writeStatus skips only a write the API server holds already, as this
// reconcile last saw it (read, or written back); any other is a patch of
// what changed, conditional on that resourceVersion. Outside a reconcile of
// that Proxy (another UID under the name) it writes nothing.
func TestWriteStatusSkipsOnlyWhatTheAPIServerHolds(t *testing.T) {
	proxy := func(uid string, phase v1alpha1.ProxyPhase) *v1alpha1.Proxy {
		p := &v1alpha1.Proxy{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: testNamespace, UID: types.UID(uid), Generation: 2, ResourceVersion: "7"},
			Status:     v1alpha1.ProxyStatus{Phase: phase, ObservedGeneration: 2},
		}
		// What writeStatus adds to every status (the replicas' summary),
		// as a status it wrote earlier holds it.
		replica.Summarise(p)
		for i := range p.Status.Conditions {
			p.Status.Conditions[i].LastTransitionTime = metav1.Unix(0, 0)
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		read    *v1alpha1.Proxy
		patches int
		fails   bool
	}{
		{"the API server holds that status", proxy("uid-1", v1alpha1.PhasePending), 0, false},
		{"the API server holds another status", proxy("uid-1", v1alpha1.PhaseReady), 1, false},
		{"a former Proxy of that name was read", proxy("uid-0", v1alpha1.PhasePending), 0, true},
		{"outside a reconcile", nil, 0, true},
	} {
		c := &statusClient{}
		r := &Reconciler{Client: c}
		ctx := context.Background()
		if tc.read != nil {
			ctx = withStatusBase(ctx, tc.read)
		}
		p := proxy("uid-1", "")
		p.Status.ObservedGeneration = 0
		err := r.writeStatus(ctx, p)
		if (err != nil) != tc.fails {
			t.Errorf("%s: error %v, want one: %v", tc.name, err, tc.fails)
		}
		if len(c.patches) != tc.patches || p.Status.Phase != v1alpha1.PhasePending || p.Status.ObservedGeneration != 2 {
			t.Errorf("%s: %d patches of phase %q generation %d, want %d of Pending, 2", tc.name, len(c.patches), p.Status.Phase, p.Status.ObservedGeneration, tc.patches)
		}
		for _, patch := range c.patches {
			if !strings.Contains(patch, `"resourceVersion":"7"`) || !strings.Contains(patch, `"phase":"Pending"`) {
				t.Errorf("%s: patch %s, want the phase, conditional on resourceVersion 7", tc.name, patch)
			}
		}
		// A second write of the same status, after the first, sends nothing.
		if err == nil {
			n := len(c.patches)
			if err := r.writeStatus(ctx, p); err != nil || len(c.patches) != n {
				t.Errorf("%s: writing the same status again: %v, %d patches, want none", tc.name, err, len(c.patches)-n)
			}
		}
	}
}

// A Ready Proxy's periodic check sends no status write when nothing
// changed, with a backend whose creation time has sub-second digits the
// API server drops (the suite's provider, as vSphere's does): every
// resync sent the status again — a no-op to the API server, which keeps
// the resourceVersion, but a request: at 1,000 Proxies 1,000 a minute
// (the fleet benchmark, docs/performance.md). Counted by the API server's own metrics.
func TestReadyProxyResyncWritesNothing(t *testing.T) {
	p := newProxy(t, "resync-quiet", nil)
	bootGuest(t, p, current)
	ready := waitReady(t, p)
	if ready.Status.Instance.CreatedAt == nil {
		t.Fatal("the status records no creation time: the test would prove nothing")
	}
	// The writes that follow Ready (its event's, the Service's) are done
	// within a few resyncs.
	time.Sleep(3 * suiteResync)
	before, readsBefore := statusUpdates(t), proxyRequests(t, "", "GET")
	time.Sleep(10 * suiteResync)
	if n := statusUpdates(t) - before; n != 0 {
		t.Errorf("%v status updates of Proxies during ten resyncs of one Ready Proxy with nothing changed, want none", n)
	}
	// Nor reads past the cache: a reconcile woken by a check's end reads
	// the Proxy from the API server only when the cache may not hold what
	// was written when the check started, and nothing was.
	if n := proxyRequests(t, "", "GET") - readsBefore; n != 0 {
		t.Errorf("%v reads of Proxies from the API server during ten resyncs of one Ready Proxy with nothing changed, want none", n)
	}
}

// statusUpdates is the API server's count of Proxy status writes
// (apiserver_request_total, verb PUT or PATCH, subresource status).
func statusUpdates(t *testing.T) float64 {
	t.Helper()
	return proxyRequests(t, "status", "PUT", "PATCH")
}

// proxyRequests is the API server's count of its requests on Proxies
// (apiserver_request_total) of the subresource ("" for the object) and
// any of the verbs.
func proxyRequests(t *testing.T, subresource string, verbs ...string) float64 {
	t.Helper()
	cs, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("the API server's metrics: %v", err)
	}
	var n float64
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="proxies"`) ||
			!strings.Contains(line, `subresource="`+subresource+`"`) ||
			!slices.ContainsFunc(verbs, func(v string) bool { return strings.Contains(line, `verb="`+v+`"`) }) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		n += v
	}
	return n
}

// While a Proxy's first Create runs, its status says so, naming the
// instance: "creating instance …" is what a user reads in the minutes a
// backend takes to clone. (A retry after an error keeps the error on
// show instead.)
func TestCreatingIsShownWhileTheCreateRuns(t *testing.T) {
	const name = "creating"
	held, release := holdCreates(t, name)
	p := newProxy(t, name, nil)
	inst := heldCreate(t, held, "the Create was never held")
	want := "creating instance " + inst.Name
	eventually(t, "Ready says "+want, func() bool {
		c := readyCondition(get(t, p))
		return c.Reason == v1alpha1.ReasonProvisioning && c.Message == want
	})
	release(nil)
	bootGuest(t, p, current)
	waitReady(t, p)
}
