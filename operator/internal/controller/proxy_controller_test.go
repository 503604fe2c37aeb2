package controller

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
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
	if err := control.FailAfterCreate(); err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, "cutoff", nil)
	bootGuest(t, p, current)
	waitReady(t, p)
	if n := len(instancesOf(t, p)); n != 1 {
		t.Errorf("%d instances after an interrupted Create, want 1", n)
	}
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

func TestTransientErrorIsRetried(t *testing.T) {
	for range 3 {
		if err := control.FailNext(contracttest.OpCreate, nil); err != nil {
			t.Fatal(err)
		}
	}
	p := newProxy(t, "transient", nil)
	bootGuest(t, p, current)
	waitReady(t, p)
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
	eventually(t, "ProviderNotConfigured is reported", func() bool {
		got := get(t, p)
		return got.Status.Phase == v1alpha1.PhaseFailed && readyCondition(got).Reason == v1alpha1.ReasonProviderNotConfigured
	})
}

func TestSpecChangeReplacesAfterTheNewInstanceIsReady(t *testing.T) {
	p := newProxy(t, "replaced", nil)
	oldIP := bootGuest(t, p, current)
	old := waitReady(t, p).Status.Instance

	got := get(t, p)
	got.Spec.Port = 8888
	if err := k8s.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
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
	p := newProxy(t, "counted", nil)
	bootGuest(t, p, current)
	waitReady(t, p)
	got := testutil.CollectAndCount(metrics.NewProxyPhases(k8s), "egressproxies_proxies")
	if got != 6 {
		t.Errorf("%d series, want one per phase (6)", got)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewProxyPhases(k8s))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ready := -1.0
	for _, m := range families[0].GetMetric() {
		if m.GetLabel()[0].GetValue() == string(v1alpha1.PhaseReady) {
			ready = m.GetGauge().GetValue()
		}
	}
	if ready < 1 {
		t.Errorf("Ready proxies = %v, want at least 1", ready)
	}
}

// A Service the operator may not take over (another controller owns it)
// keeps the Proxy from Ready, and the Proxy says why; once it is gone the
// Proxy becomes Ready.
func TestServiceConflictIsReportedThenResolved(t *testing.T) {
	ctx := context.Background()
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "svc-owner", Namespace: "default"}}
	if err := k8s.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
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
	eventually(t, "ServiceUnavailable is reported", func() bool {
		return readyCondition(get(t, p)).Reason == v1alpha1.ReasonServiceUnavailable
	})
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
					if l.GetName() == "method" && l.GetValue() == "PUT" {
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
		t.Errorf("%v PUTs during resyncs that changed nothing", n)
	}
}
