package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// Each Proxy has a readiness series and its desired and ready replica
// counts, for the not-Ready and degraded alerts (docs/operator.md): a
// Proxy's own series, so an alert names the Proxy, not a count per phase.
func TestPerProxySeries(t *testing.T) {
	ready := &v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "partner"},
		Spec:   v1alpha1.ProxySpec{Provider: "lab", Replicas: 2},
		Status: v1alpha1.ProxyStatus{Phase: v1alpha1.PhaseReady, ReadyReplicas: 1}}
	meta.SetStatusCondition(&ready.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready"})
	fresh := &v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "new"}, Spec: v1alpha1.ProxySpec{Provider: "vc"}}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ready, fresh).Build()
	elected := make(chan struct{})
	close(elected)
	want := `
# HELP egressproxies_proxy_ready 1 when the Proxy's Ready condition is True, else 0.
# TYPE egressproxies_proxy_ready gauge
egressproxies_proxy_ready{namespace="team-b",provider="vc",proxy="new"} 0
egressproxies_proxy_ready{namespace="team-a",provider="lab",proxy="partner"} 1
# HELP egressproxies_proxy_replicas The Proxy's replicas by state: desired (spec.replicas, at least 1) and ready (answering).
# TYPE egressproxies_proxy_replicas gauge
egressproxies_proxy_replicas{namespace="team-b",proxy="new",state="desired"} 1
egressproxies_proxy_replicas{namespace="team-b",proxy="new",state="ready"} 0
egressproxies_proxy_replicas{namespace="team-a",proxy="partner",state="desired"} 2
egressproxies_proxy_replicas{namespace="team-a",proxy="partner",state="ready"} 1
`
	if err := testutil.CollectAndCompare(NewProxyPhases(reader, elected), strings.NewReader(want), "egressproxies_proxy_ready", "egressproxies_proxy_replicas"); err != nil {
		t.Error(err)
	}
}
