package proxy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest/memprovider"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller/gc"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metrics"
)

func TestProxyBecomesReadyAndServes(t *testing.T) {
	p := newProxy(t, "ready", nil)
	ip := bootGuest(t, p, current)
	got := waitReady(t, p)

	if got.Status.Address != ip || got.Status.Endpoint != "http://ready.default.svc:3128" {
		t.Errorf("status address %q endpoint %q, want %s and the Service URL", got.Status.Address, got.Status.Endpoint, ip)
	}
	if c := readyCondition(got); c.Reason != v1alpha1.ReasonReady || c.ObservedGeneration != got.Generation {
		t.Errorf("Ready condition %+v", c)
	}
	if got.Status.Instance.CreatedAt == nil || got.Status.Instance.State != string(contract.StateRunning) {
		t.Errorf("instance status %+v", got.Status.Instance)
	}
	var svc corev1.Service
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, &svc); err != nil {
		t.Fatalf("Service: %v", err)
	}
	if svc.Spec.Selector != nil || svc.Spec.Ports[0].Port != 3128 {
		t.Errorf("Service spec %+v: want selector-less on 3128", svc.Spec)
	}
	var slice discoveryv1.EndpointSlice
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, &slice); err != nil {
		t.Fatalf("EndpointSlice: %v", err)
	}
	if slice.Labels[discoveryv1.LabelServiceName] != p.Name || slice.Endpoints[0].Addresses[0] != ip {
		t.Errorf("EndpointSlice %+v: want service-name %s and address %s", slice, p.Name, ip)
	}
	if n := len(instancesOf(t, p)); n != 1 {
		t.Errorf("%d instances for the Proxy, want 1", n)
	}
	for _, want := range []string{"Created: created instance", "Ready: proxy answers at " + ip} {
		eventually(t, "event "+want, func() bool { return strings.Contains(strings.Join(eventsFor(t, p), "\n"), want) })
	}
}

func TestNotReadyUntilThePortAnswers(t *testing.T) {
	proxyUp.Store(false)
	defer proxyUp.Store(true)
	p := newProxy(t, "unanswered", nil)
	bootGuest(t, p, current)
	eventually(t, "ProxyUnreachable is reported", func() bool {
		return readyCondition(get(t, p)).Reason == v1alpha1.ReasonProxyUnreachable
	})
	if got := get(t, p); got.Status.Phase == v1alpha1.PhaseReady {
		t.Fatal("Ready although the port does not answer as a proxy")
	}
	proxyUp.Store(true)
	waitReady(t, p)
}

func TestDeleteRemovesEveryInstance(t *testing.T) {
	p := newProxy(t, "deleted", nil)
	bootGuest(t, p, current)
	waitReady(t, p)
	uid := get(t, p).UID
	deleteProxy(t, p)
	expectNoInstanceOf(t, uid)
}

// expectNoInstanceOf fails the test if the backend still holds a
// non-terminated instance marked with the Proxy UID uid.
func expectNoInstanceOf(t *testing.T, uid types.UID) {
	t.Helper()
	entry, _ := set.Get(testProvider)
	left, err := entry.Provider.ListByTag(context.Background(), contract.LabelUID, string(uid))
	if err != nil {
		t.Fatal(err)
	}
	for _, inst := range left {
		if inst.State != contract.StateTerminated {
			t.Errorf("instance %s outlived its Proxy (%s)", inst.ProviderID, inst.State)
		}
	}
}

// A Create that made the VM but whose answer was lost is the same as a
// crash between the Create and the status write: the next reconcile must
// find the VM, not make a second.
func TestCreateCutOffMakesNoDuplicate(t *testing.T) {
	cutOff := transientCreates(t)
	if err := control.FailAfterCreate(); err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, "cutoff", nil)
	bootGuest(t, p, current)
	waitReady(t, p)
	if n := transientCreates(t) - cutOff; n != 1 {
		t.Errorf("%v Creates failed, want the one cut off", n)
	}
	if n := len(instancesOf(t, p)); n != 1 {
		t.Errorf("%d instances after an interrupted Create, want 1", n)
	}
}

// transientCreates counts the test provider's Creates failed with a
// transient error so far.
func transientCreates(t *testing.T) float64 {
	t.Helper()
	return testutil.ToFloat64(metrics.ProviderCallErrors.WithLabelValues(testProvider, memprovider.Type, "Create", string(contract.ClassTransient)))
}

func TestInstanceDeletedBehindTheOperatorsBackIsRecreated(t *testing.T) {
	p := newProxy(t, "recreated", nil)
	bootGuest(t, p, current)
	first := waitReady(t, p).Status.Instance.ProviderID
	entry, _ := set.Get(testProvider)
	if err := entry.Provider.Delete(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the operator notices the instance is gone", func() bool {
		return slices.ContainsFunc(eventsFor(t, p), func(e string) bool { return strings.HasPrefix(e, v1alpha1.ReasonInstanceGone+":") })
	})
	// Until the new VM answers, the Proxy is not Ready, and says why.
	eventually(t, "the Proxy is no longer Ready", func() bool {
		got := get(t, p)
		c := readyCondition(got)
		return got.Status.Phase != v1alpha1.PhaseReady && c.Status == metav1.ConditionFalse && strings.HasPrefix(c.Message, "instance ")
	})
	bootGuest(t, p, func(s *v1alpha1.ProxyStatus) *v1alpha1.InstanceRef {
		if s.Instance != nil && s.Instance.State == string(contract.StateProvisioning) {
			return s.Instance
		}
		return nil
	})
	waitReady(t, p)
	if n := len(instancesOf(t, p)); n != 1 {
		t.Errorf("%d instances after recreation, want 1", n)
	}
}

func TestQuotaErrorBacksOffWithReason(t *testing.T) {
	if err := control.FailNext(contracttest.OpCreate, contract.ErrQuota); err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, "quota", nil)
	eventually(t, "QuotaExceeded is reported", func() bool {
		got := get(t, p)
		return readyCondition(got).Reason == v1alpha1.ReasonQuotaExceeded &&
			got.Status.LastError != nil && got.Status.LastError.Class == string(contract.ClassQuota)
	})
	// The back-off ends and the next Create succeeds.
	bootGuest(t, p, current)
	if got := waitReady(t, p); got.Status.LastError != nil {
		t.Errorf("lastError kept after Ready: %+v", got.Status.LastError)
	}
}

func TestPermanentErrorFailsWithTheProvidersMessage(t *testing.T) {
	if err := control.FailNext(contracttest.OpCreate, contract.ErrPermanent); err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, "permanent", nil)
	eventually(t, "the Proxy fails with the provider's message", func() bool {
		got := get(t, p)
		c := readyCondition(got)
		return got.Status.Phase == v1alpha1.PhaseFailed && c.Reason == v1alpha1.ReasonProviderError &&
			strings.Contains(c.Message, "lacks the vm.create privilege")
	})
}

// Transient errors are retried by the operator on its own: three failed
// Creates, then a VM.
func TestTransientErrorIsRetried(t *testing.T) {
	failed := transientCreates(t)
	for range 3 {
		if err := control.FailNext(contracttest.OpCreate, nil); err != nil {
			t.Fatal(err)
		}
	}
	p := newProxy(t, "transient", nil)
	bootGuest(t, p, current)
	waitReady(t, p)
	if n := transientCreates(t) - failed; n != 3 {
		t.Errorf("%v Creates failed, want the 3 injected", n)
	}
	if n := len(instancesOf(t, p)); n != 1 {
		t.Errorf("%d instances, want 1", n)
	}
}

// While the backend does not answer (every call times out), the Proxy says
// so — BackendUnavailable, class Transient, the operation named — and
// becomes Ready, the error cleared, once it answers again.
func TestTransientErrorIsReported(t *testing.T) {
	release := control.Stall()
	defer release()
	p := newProxy(t, "unavailable", nil)
	eventually(t, "BackendUnavailable is reported", func() bool {
		got := get(t, p)
		e := got.Status.LastError
		return readyCondition(got).Reason == v1alpha1.ReasonBackendUnavailable && got.Status.Phase == v1alpha1.PhasePending &&
			e != nil && e.Class == string(contract.ClassTransient) && strings.HasPrefix(e.Message, "Create: ")
	})
	release()
	bootGuest(t, p, current)
	if got := waitReady(t, p); got.Status.LastError != nil {
		t.Errorf("lastError kept after Ready: %+v", got.Status.LastError)
	}
}

func TestInvalidPlacementIsPermanent(t *testing.T) {
	p := newProxy(t, "badplacement", func(p *v1alpha1.Proxy) { p.Spec.Placement.MachineType = "huge" })
	eventually(t, "the unknown machine type is named", func() bool {
		c := readyCondition(get(t, p))
		return c.Reason == v1alpha1.ReasonProviderError && strings.Contains(c.Message, `placement.machineType "huge"`)
	})
}

func TestUnknownProviderIsACondition(t *testing.T) {
	p := newProxy(t, "noprovider", func(p *v1alpha1.Proxy) { p.Spec.Provider = "nowhere" })
	// Its deletion waits for the entry, which never comes: release it as
	// docs/operator.md says (cleanups run last-registered first).
	t.Cleanup(func() { releaseByHand(t, k8s, p) })
	eventually(t, "ProviderNotConfigured is reported", func() bool {
		got := get(t, p)
		return got.Status.Phase == v1alpha1.PhaseFailed && readyCondition(got).Reason == v1alpha1.ReasonProviderNotConfigured
	})
}

func TestSpecChangeReplacesAfterTheNewInstanceIsReady(t *testing.T) {
	p := newProxy(t, "replaced", nil)
	oldIP := bootGuest(t, p, current)
	old := waitReady(t, p).Status.Instance

	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Port = 8888 })
	eventually(t, "a replacement is created", func() bool {
		s := get(t, p).Status
		return s.Replacement != nil && s.Replacement.ProviderID != ""
	})
	// While the replacement boots, the old instance keeps serving.
	during := get(t, p)
	if during.Status.Phase != v1alpha1.PhaseReplacing || during.Status.Address != oldIP {
		t.Errorf("during replacement: phase %s address %s, want Replacing and %s", during.Status.Phase, during.Status.Address, oldIP)
	}
	if n := len(instancesOf(t, p)); n != 2 {
		t.Errorf("%d instances during replacement, want the old and the new", n)
	}
	newIP := bootGuest(t, p, replacement)
	done := waitReady(t, p)
	if done.Status.Instance.ProviderID == old.ProviderID || done.Status.Address != newIP || done.Status.Endpoint != "http://replaced.default.svc:8888" {
		t.Errorf("after replacement: %+v", done.Status)
	}
	eventually(t, "the old instance is deleted", func() bool {
		left := instancesOf(t, p)
		return len(left) == 1 && left[0].ProviderID == done.Status.Instance.ProviderID
	})
}

func TestProxiesByPhaseMetric(t *testing.T) {
	byPhase := func() map[string]float64 {
		t.Helper()
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(metrics.NewProxyPhases(k8s, leader()))
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, m := range families[0].GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
		return out
	}
	before := byPhase()
	p := newProxy(t, "counted", nil)
	bootGuest(t, p, current)
	waitReady(t, p)
	after := byPhase()
	for _, phase := range []v1alpha1.ProxyPhase{v1alpha1.PhasePending, v1alpha1.PhaseProvisioning, v1alpha1.PhaseReady, v1alpha1.PhaseReplacing, v1alpha1.PhaseFailed, v1alpha1.PhaseDeleting} {
		want := before[string(phase)]
		if phase == v1alpha1.PhaseReady {
			want++
		}
		if got, ok := after[string(phase)]; !ok || got != want {
			t.Errorf("proxies{phase=%s} = %v (present %v), want %v", phase, got, ok, want)
		}
	}
	if len(after) != 6 {
		t.Errorf("series %v, want one per phase", after)
	}
}

// A Service the operator may not take over (another controller owns it)
// keeps the Proxy from Ready, and the Proxy says why; once it is gone the
// Proxy becomes Ready (the operator looks again at each resync: the
// Service is not in its cache).
func TestServiceConflictIsReportedThenResolved(t *testing.T) {
	ctx := context.Background()
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "svc-owner", Namespace: "default"}}
	create(t, foreign)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: "default", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: foreign.Name, UID: foreign.UID, Controller: ptr.To(true),
		}}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if err := k8s.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, "taken", nil)
	bootGuest(t, p, current)
	waitConflict(t, p, "Service default/taken", "controlled by ConfigMap svc-owner")
	if err := k8s.Delete(ctx, svc); err != nil {
		t.Fatal(err)
	}
	waitReady(t, p)
}

// A Ready Proxy's resyncs find nothing to change and send the API server
// no write: the operator's PUTs stay put while it keeps checking its VM.
// (The API server would drop an unchanged status anyway, so only the
// request count shows the difference.)
func TestResyncOfAReadyProxyWritesNothing(t *testing.T) {
	p := newProxy(t, "quiet", nil)
	bootGuest(t, p, current)
	waitReady(t, p)
	gets := func() uint64 {
		var m dto.Metric
		h, err := metrics.ProviderCallDuration.GetMetricWithLabelValues(testProvider, "memory", "Get", "")
		if err != nil {
			t.Fatal(err)
		}
		if err := h.(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount()
	}
	puts := func() float64 {
		families, err := ctrlmetrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		total := 0.0
		for _, f := range families {
			if f.GetName() != "rest_client_requests_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "method" && (l.GetValue() == "PUT" || l.GetValue() == "PATCH") {
						total += m.GetCounter().GetValue()
					}
				}
			}
		}
		return total
	}
	// Let the Ready write and its echo settle: one resync first.
	settled := gets()
	eventually(t, "a first resync", func() bool { return gets() > settled })
	before, putsBefore := gets(), puts()
	eventually(t, "three more resyncs", func() bool { return gets() >= before+3 })
	if n := puts() - putsBefore; n != 0 {
		t.Errorf("%v PUTs and PATCHes during resyncs that changed nothing", n)
	}
}

// The instance's name is in the status before Create is called. A crash
// between Create and the status write then leaves a VM the operator knows
// by name: the garbage collector, however old the VM, spares it as the
// Proxy's pending instance, and the next reconcile resumes it instead of
// making another.
func TestInstanceInFlightIsRecordedAndSpared(t *testing.T) {
	ctx := context.Background()
	held, release := holdCreates(t, "inflight-")
	defer release(nil) // before the Proxy's deletion, which the held Create would stall
	p := newProxy(t, "inflight", nil)
	inst := heldCreate(t, held, "timed out waiting for the Create of inflight")

	// The VM exists and Create has not returned: the window of a crash.
	if ref := get(t, p).Status.Instance; ref == nil || ref.Name != inst.Name || ref.ProviderID != "" {
		t.Fatalf("status.instance while its Create is in flight: %+v, want name %s and no providerID yet", ref, inst.Name)
	}
	entry, _ := set.Get(testProvider)
	collector := &gc.Collector{Reader: k8s, Providers: set, Now: func() time.Time { return time.Now().Add(entry.GC.MinAge + time.Minute) }}
	swept, err := collector.Sweep(ctx, entry)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range swept {
		if d.ProviderID == inst.ProviderID {
			t.Fatalf("the garbage collector deleted %s, whose Create is in flight", inst.ProviderID)
		}
	}

	// The answer is lost; the operator resumes the same VM.
	release(errors.New("connection reset by peer"))
	bootGuest(t, p, current)
	got := waitReady(t, p)
	if got.Status.Instance.ProviderID != inst.ProviderID {
		t.Errorf("serving %s, want the VM made before the crash, %s", got.Status.Instance.ProviderID, inst.ProviderID)
	}
	if n := len(instancesOf(t, p)); n != 1 {
		t.Errorf("%d instances, want 1", n)
	}
}

// Zero waits take the defaults; the probe never waits longer than a poll;
// a wait that is set is kept.
func TestTimingDefaults(t *testing.T) {
	want := Timing{Poll: 5 * time.Second, Probe: time.Second, Resync: time.Minute, QuotaBackoff: 5 * time.Minute, PermanentRetry: 30 * time.Minute, Drain: 10 * time.Second, Watch: time.Second}
	if got := (Timing{}).withDefaults(); got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	if got := (Timing{Poll: 200 * time.Millisecond}).withDefaults(); got.Probe != 200*time.Millisecond {
		t.Errorf("probe %s with a 200ms poll, want 200ms", got.Probe)
	}
	set := Timing{Poll: 1, Probe: 2, Resync: 3, QuotaBackoff: 4, PermanentRetry: 5, Drain: 6, Watch: -1}
	if got := set.withDefaults(); got != set {
		t.Errorf("%+v became %+v", set, got)
	}
}

// A VM found stopped is deleted and made again, with an event saying so.
func TestStoppedInstanceIsCreatedAgain(t *testing.T) {
	p := newProxy(t, "stopped", nil)
	bootGuest(t, p, current)
	first := waitReady(t, p).Status.Instance.ProviderID
	stopVM(t, first)
	eventually(t, "the operator notices the instance stopped", func() bool {
		return slices.ContainsFunc(eventsFor(t, p), func(e string) bool { return strings.HasPrefix(e, v1alpha1.ReasonInstanceStopped+": instance ") })
	})
	// The operator deletes it and makes it again under the same name.
	waitCreatedAgain(t, p)
}

// While a replacement fails, the old instance keeps serving: Ready stays
// True, the phase says Replacing, Provisioned says what the replacement
// met. A replaced instance that cannot be deleted is left to the garbage
// collector, with a warning.
func TestFailingReplacementKeepsTheOldOneServing(t *testing.T) {
	p := newProxy(t, "replfail", nil)
	oldIP := bootGuest(t, p, current)
	old := waitReady(t, p).Status.Instance
	if err := control.FailNext(contracttest.OpCreate, contract.ErrPermanent); err != nil {
		t.Fatal(err)
	}
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Port = 8080 })
	eventually(t, "the replacement's failure is reported beside the serving instance", func() bool {
		got := get(t, p)
		prov := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionProvisioned)
		return got.Status.Phase == v1alpha1.PhaseReplacing && readyCondition(got).Status == metav1.ConditionTrue &&
			got.Status.Address == oldIP && got.Status.Instance.ProviderID == old.ProviderID &&
			prov != nil && prov.Status == metav1.ConditionFalse && prov.Reason == v1alpha1.ReasonProviderError &&
			strings.HasPrefix(prov.Message, "replacement: Create: ")
	})
	// The permanent error is retried after PermanentRetry, and succeeds.
	eventually(t, "the replacement is created", func() bool {
		s := get(t, p).Status
		return s.Replacement != nil && s.Replacement.ProviderID != ""
	})
	got := get(t, p)
	if prov := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionProvisioned); prov == nil || !strings.HasPrefix(prov.Message, "replacement: ") ||
		strings.HasPrefix(prov.Message, "replacement: replacement: ") {
		t.Errorf("Provisioned while the replacement boots: %+v, want it to speak of the replacement, once", prov)
	}
	if err := control.FailNext(contracttest.OpDelete, nil); err != nil {
		t.Fatal(err)
	}
	bootGuest(t, p, replacement)
	waitReady(t, p)
	eventually(t, "a warning that the replaced instance is left to the garbage collector", func() bool {
		return slices.ContainsFunc(eventsFor(t, p), func(e string) bool {
			return strings.HasPrefix(e, "DeleteFailed: deleting instance "+old.Name+" (replaced)") && strings.HasSuffix(e, "the garbage collector will retry")
		})
	})
	if n := len(instancesOf(t, p)); n != 2 {
		t.Errorf("%d instances, want the new one and the one whose delete failed", n)
	}
}

// A spec changed back before the replacement serves deletes the
// replacement and keeps the instance; a spec changed again replaces the
// replacement.
func TestSpecChangedBackOrAgainRetiresTheReplacement(t *testing.T) {
	p := newProxy(t, "changeback", nil)
	bootGuest(t, p, current)
	serving := waitReady(t, p).Status.Instance
	setPort := func(port int32) {
		t.Helper()
		updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Port = port })
	}
	created := func(port int32) *v1alpha1.InstanceRef {
		t.Helper()
		var r *v1alpha1.InstanceRef
		eventually(t, fmt.Sprintf("a replacement on port %d is created", port), func() bool {
			got := get(t, p)
			r = got.Status.Replacement
			return got.Status.ObservedGeneration == got.Generation && got.Spec.Port == port && r != nil && r.ProviderID != ""
		})
		return r
	}
	retired := func(name, why string) {
		t.Helper()
		eventually(t, "the replacement "+name+" is deleted ("+why+")", func() bool {
			return slices.Contains(eventsFor(t, p), "Deleted: deleted instance "+name+" ("+why+")")
		})
	}

	setPort(8001)
	first := created(8001)
	setPort(8002)
	second := created(8002)
	if second.Name == first.Name {
		t.Fatalf("the spec changed again and the replacement %s stayed", first.Name)
	}
	retired(first.Name, "the spec changed again")

	setPort(3128)
	retired(second.Name, "the spec changed back")
	eventually(t, "the serving instance alone, Ready", func() bool {
		got := get(t, p)
		return got.Status.Replacement == nil && got.Status.Instance.ProviderID == serving.ProviderID && got.Status.Phase == v1alpha1.PhaseReady
	})
	eventually(t, "only the serving instance is left", func() bool {
		left := instancesOf(t, p)
		return len(left) == 1 && left[0].ProviderID == serving.ProviderID
	})
}

// A Proxy's own cloud-init comes from its Secret, byte for byte; a missing
// Secret or key is named on the Proxy until it appears.
func TestCloudInitFromASecret(t *testing.T) {
	ctx := context.Background()
	p := newProxy(t, "userdata", func(p *v1alpha1.Proxy) {
		p.Spec.CloudInit = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "userdata"}, Key: "user-data"}
	})
	unavailable := func(want string) {
		t.Helper()
		eventually(t, "CloudInitUnavailable naming "+want, func() bool {
			c := readyCondition(get(t, p))
			return c.Reason == v1alpha1.ReasonCloudInitUnavailable && strings.Contains(c.Message, want)
		})
	}
	unavailable(`Secret "userdata" not found`)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "userdata", Namespace: testNamespace}, Data: map[string][]byte{"other": []byte("x")}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, secret) })
	unavailable(`Secret "userdata" has no key "user-data"`)
	userData := []byte("#cloud-config\nhostname: userdata\n")
	secret.Data["user-data"] = userData
	if err := k8s.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	bootGuest(t, p, current)
	got := waitReady(t, p)
	if data, err := control.UserData(ctx, got.Status.Instance.ProviderID); err != nil || string(data) != string(userData) {
		t.Errorf("the VM's user-data %q (%v), want the Secret's %q", data, err, userData)
	}
}

// A Proxy being deleted says so at once, before the backend has answered;
// it goes once the backend deletes its instances.
func TestDeletingIsShownAtOnce(t *testing.T) {
	p := newProxy(t, "deleting", nil)
	bootGuest(t, p, current)
	uid := waitReady(t, p).UID
	release := control.Stall()
	defer release()
	if err := k8s.Delete(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	var got *v1alpha1.Proxy
	eventually(t, "phase Deleting", func() bool {
		got = get(t, p)
		return got.Status.Phase == v1alpha1.PhaseDeleting
	})
	if got.Status.LastError != nil {
		t.Errorf("Deleting shown only after the backend failed: %+v", got.Status.LastError)
	}
	release()
	deleteProxy(t, p)
	expectNoInstanceOf(t, uid)
}

// A replacement that takes over the address of the instance it replaces
// (a fixed IP) changes neither the Service nor the EndpointSlice, so no
// event of theirs reconciles the Proxy again: the reconcile that makes the
// replacement serve must delete the old instance itself.
func TestReplacementAtTheSameAddressDeletesTheOldOne(t *testing.T) {
	ctx := context.Background()
	p := newProxy(t, "sameip", func(p *v1alpha1.Proxy) { p.Spec.AllowedClients = []v1alpha1.CIDR{"10.1.0.0/16"} })
	ip := bootGuest(t, p, current)
	old := waitReady(t, p).Status.Instance
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.AllowedClients = []v1alpha1.CIDR{"10.2.0.0/16"} }) // a new cloud-init, the same port
	var next string
	eventually(t, "a replacement is created", func() bool {
		r := get(t, p).Status.Replacement
		if r != nil && r.ProviderID != "" {
			next = r.ProviderID
		}
		return next != ""
	})
	if err := control.ReportIP(ctx, next, ip); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replacement serves", func() bool {
		got := get(t, p)
		return got.Status.Phase == v1alpha1.PhaseReady && got.Status.Instance.ProviderID == next
	})
	eventually(t, "the old instance is deleted", func() bool {
		left := instancesOf(t, p)
		return len(left) == 1 && left[0].ProviderID == next
	})
	// The event follows the deletion: the recorder posts it on its own.
	eventually(t, "the old instance's deletion is told", func() bool {
		return slices.Contains(eventsFor(t, p), "Deleted: deleted instance "+old.Name+" (replaced)")
	})
}

// A provider error whose status write fails still fails the reconcile, so
// the controller retries soon rather than after the class's wait; the error
// it fails with is the provider's when there is one.
func TestProviderErrorWhenTheStatusCannotBeWritten(t *testing.T) {
	ctx := context.Background()
	writeErr := errors.New("the API server is away")
	unavailable := errors.New("503 service unavailable")
	timing := Timing{}.withDefaults()
	for _, tc := range []struct {
		name     string
		err      error
		writeErr error
		want     error         // errors.Is the returned error; nil: no error
		after    time.Duration // RequeueAfter when no error
	}{
		{"quota", contract.Quota(errors.New("cores exhausted")), nil, nil, timing.QuotaBackoff},
		{"quota, status not written", contract.Quota(errors.New("cores exhausted")), writeErr, writeErr, 0},
		{"permanent", contract.Permanentf("forbidden"), nil, nil, timing.PermanentRetry},
		{"permanent, status not written", contract.Permanentf("forbidden"), writeErr, writeErr, 0},
		{"transient", unavailable, nil, unavailable, 0},
		{"transient, status not written", unavailable, writeErr, unavailable, 0},
	} {
		c := &statusClient{patchErr: tc.writeErr}
		r := &Reconciler{Client: c, Timing: timing}
		p := &v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: testNamespace, ResourceVersion: "1"}}
		result, err := r.providerError(withStatusBase(ctx, p), p, "Create", tc.err)
		switch {
		case tc.want == nil && err != nil, tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.want)
		case tc.want == nil && result.RequeueAfter != tc.after:
			t.Errorf("%s: retry after %s, want %s", tc.name, result.RequeueAfter, tc.after)
		}
		if len(c.patches) != 1 || p.Status.LastError == nil || p.Status.LastError.Message != "Create: "+tc.err.Error() {
			t.Errorf("%s: %d status writes, lastError %+v", tc.name, len(c.patches), p.Status.LastError)
		}
	}
}

// A deleted Proxy's instances are deleted at once, even while another of
// its instances lingers in a delete the backend has not finished (listed
// first); the Proxy goes when the last one is gone.
func TestDeleteDoesNotWaitForALingeringInstance(t *testing.T) {
	ctx := context.Background()
	p := newProxy(t, "linger", nil)
	bootGuest(t, p, current)
	got := waitReady(t, p)
	live := got.Status.Instance.ProviderID
	entry, _ := set.Get(testProvider)
	earlier, err := entry.Provider.Create(ctx, contract.CreateRequest{
		Name: "a-linger-earlier", UID: string(got.UID), Owner: entry.Owner, Port: 3128, CloudInit: []byte("#cloud-config\n"),
		Placement: contract.Placement{Region: "r1", MachineType: "small", Image: "debian-12"},
	})
	if err != nil {
		t.Fatal(err)
	}
	finish, err := control.BeginDelete(ctx, earlier.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	defer finish()

	if err := k8s.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the live instance is deleted while the earlier one lingers", func() bool {
		inst, err := entry.Provider.Get(ctx, live)
		return errors.Is(err, contract.ErrNotFound) || err == nil && inst.State == contract.StateTerminated
	})
	// Polls later, the lingering instance still holds the finalizer: the
	// Proxy and its addresses go only once every VM is gone.
	time.Sleep(3 * suitePoll)
	if got := get(t, p); got.Status.Phase != v1alpha1.PhaseDeleting {
		t.Errorf("phase %s while an instance lingers, want Deleting", got.Status.Phase)
	}
	finish()
	deleteProxy(t, p)
}

// A Delete cut off after it began leaves an instance that reads
// Terminated and that nothing on the backend finishes (vSphere's deleting
// mark). The finalizer deletes it again rather than waiting for it to go
// (the fleet benchmark, docs/performance.md: a fleet deleted under injected faults waited out the mark's
// ten minutes).
func TestCutOffDeleteIsFinishedByTheFinalizer(t *testing.T) {
	p := newProxy(t, "cutoff-final", nil)
	bootGuest(t, p, current)
	id := waitReady(t, p).Status.Instance.ProviderID
	cutOffDelete(t, id)
	deleteProxy(t, p)
	entry, _ := set.Get(testProvider)
	if _, err := entry.Provider.Get(context.Background(), id); !errors.Is(err, contract.ErrNotFound) {
		t.Errorf("Get(%s) after its Proxy is gone = %v, want ErrNotFound", id, err)
	}
}

// A Proxy's own instance left Terminated by a cut-off Delete is deleted
// and made again, not waited on until the backend drops it.
func TestCutOffDeleteOfTheInstanceIsFinished(t *testing.T) {
	p := newProxy(t, "cutoff-own", nil)
	bootGuest(t, p, current)
	id := waitReady(t, p).Status.Instance.ProviderID
	cutOffDelete(t, id)
	waitCreatedAgain(t, p)
}

// waitCreatedAgain waits for the Proxy's instance to be gone and made
// again, boots the new one and checks it is the only one.
func waitCreatedAgain(t *testing.T, p *v1alpha1.Proxy) {
	t.Helper()
	eventually(t, "the instance is created again", func() bool {
		return slices.ContainsFunc(eventsFor(t, p), func(e string) bool { return strings.HasPrefix(e, v1alpha1.ReasonInstanceGone+":") })
	})
	bootGuest(t, p, func(s *v1alpha1.ProxyStatus) *v1alpha1.InstanceRef {
		if s.Instance != nil && s.Instance.State == string(contract.StateProvisioning) {
			return s.Instance
		}
		return nil
	})
	waitReady(t, p)
	if n := len(instancesOf(t, p)); n != 1 {
		t.Errorf("%d instances after recreation, want 1", n)
	}
}
