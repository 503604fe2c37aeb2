package health

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controllertest"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metrics"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

func readHealth(t *testing.T, name string) *v1alpha1.ProviderHealth {
	t.Helper()
	var ph v1alpha1.ProviderHealth
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, &ph); err != nil {
		t.Fatal(err)
	}
	return &ph
}

// checkSeries returns the reason label of every check_ok series of one
// provider's target.
func checkSeries(t *testing.T, provider, target string) []string {
	t.Helper()
	ch := make(chan prometheus.Metric, 1000)
	metrics.CheckOK.Collect(ch)
	close(ch)
	var reasons []string
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{}
		for _, l := range pb.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["provider"] == provider && labels["target"] == target {
			reasons = append(reasons, labels["reason"])
		}
	}
	return reasons
}

// longAgo is a transition time no check round writes: a test backdates the
// ProviderHealth to it, so a round that keeps a time and one that writes
// its own are told apart at the API's one-second resolution.
var longAgo = metav1.NewTime(time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC))

func backdate(t *testing.T, ph *v1alpha1.ProviderHealth) {
	t.Helper()
	for i := range ph.Status.Checks {
		ph.Status.Checks[i].LastCheckTime = longAgo
		ph.Status.Checks[i].LastTransitionTime = longAgo
	}
	for i := range ph.Status.Conditions {
		ph.Status.Conditions[i].LastTransitionTime = longAgo
	}
	if err := k8s.Status().Update(context.Background(), ph); err != nil {
		t.Fatal(err)
	}
}

// A round stamps every check with its time; lastTransitionTime, on each
// check and on the Ready condition, moves only when the outcome changes.
func TestProviderHealthIsWrittenAndUpdated(t *testing.T) {
	ctx := context.Background()
	entry, _ := set.Get(testProvider)
	h := &Checker{Client: k8s, Providers: set}

	if err := h.Check(ctx, entry); err != nil {
		t.Fatal(err)
	}
	ph := readHealth(t, testProvider)
	ready := meta.FindStatusCondition(ph.Status.Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.Reason != v1alpha1.ReasonChecksPassed || ready.Message != "3 checks passed" || ph.Status.Type != "memory" {
		t.Fatalf("healthy provider: %+v", ph.Status)
	}
	var targets []string
	for _, c := range ph.Status.Checks {
		targets = append(targets, c.Target)
		if !c.OK || c.Reason != contract.ReasonOK {
			t.Errorf("check %+v of a healthy provider", c)
		}
	}
	if strings.Join(targets, " ") != "credentials region/r1 image/debian-12" {
		t.Errorf("check targets %v, want credentials, region/r1, image/debian-12", targets)
	}
	if got := testutil.ToFloat64(metrics.CheckOK.WithLabelValues(testProvider, "credentials", contract.ReasonOK)); got != 1 {
		t.Errorf("check_ok{credentials} = %v, want 1", got)
	}

	// The same outcome: every check's time moves, no transition time does.
	backdate(t, ph)
	round := time.Now().Truncate(time.Second)
	if err := h.Check(ctx, entry); err != nil {
		t.Fatal(err)
	}
	ph = readHealth(t, testProvider)
	for _, c := range ph.Status.Checks {
		if c.LastCheckTime.Time.Before(round) || !c.LastTransitionTime.Equal(&longAgo) {
			t.Errorf("check %s after a round with the same outcome: checked %v, transition %v; want the round's and %v", c.Target, c.LastCheckTime, c.LastTransitionTime, longAgo)
		}
	}
	if ready := meta.FindStatusCondition(ph.Status.Conditions, v1alpha1.ConditionReady); !ready.LastTransitionTime.Equal(&longAgo) {
		t.Errorf("Ready moved its transition time without a transition: %+v", ready)
	}

	// The credential is rejected: every check fails, and so its transition
	// time is this round's, as is the Ready condition's.
	backdate(t, ph)
	control.RejectCredentials(true)
	defer control.RejectCredentials(false)
	round = time.Now().Truncate(time.Second)
	if err := h.Check(ctx, entry); err != nil {
		t.Fatal(err)
	}
	ph = readHealth(t, testProvider)
	ready = meta.FindStatusCondition(ph.Status.Conditions, v1alpha1.ConditionReady)
	if ready.Status != metav1.ConditionFalse || ready.Reason != v1alpha1.ReasonChecksFailed || !strings.Contains(ready.Message, "credentials (Unauthenticated)") {
		t.Errorf("Ready with the credential rejected: %+v", ready)
	}
	if ready.LastTransitionTime.Time.Before(round) {
		t.Errorf("Ready turned False but kept the transition time %v", ready.LastTransitionTime)
	}
	for _, c := range ph.Status.Checks {
		if c.OK || c.Reason != contract.ReasonUnauthenticated {
			t.Errorf("check %+v with the credential rejected", c)
		}
		if c.LastTransitionTime.Time.Before(round) {
			t.Errorf("check %s failed but kept the transition time %v", c.Target, c.LastTransitionTime)
		}
	}
	// One series per target: the one of the old reason is gone.
	if got := testutil.ToFloat64(metrics.CheckOK.WithLabelValues(testProvider, "credentials", contract.ReasonUnauthenticated)); got != 0 {
		t.Errorf("check_ok{credentials, Unauthenticated} = %v, want 0", got)
	}
	if reasons := checkSeries(t, testProvider, "credentials"); len(reasons) != 1 || reasons[0] != contract.ReasonUnauthenticated {
		t.Errorf("check_ok series for the credentials have reasons %v, want only Unauthenticated", reasons)
	}
}

// A provider without a Checker is reported as not checked, not as healthy.
func TestProviderHealthOfAProviderWithoutChecks(t *testing.T) {
	ctx := context.Background()
	mem, _ := set.Get(testProvider)
	entry := &providers.Entry{Name: "unchecked", Type: "memory", Provider: struct{ contract.Provider }{mem.Provider}}
	h := &Checker{Client: k8s, Providers: providers.NewSet(entry)}
	if err := h.Check(ctx, entry); err != nil {
		t.Fatal(err)
	}
	ph := readHealth(t, entry.Name)
	t.Cleanup(func() { _ = k8s.Delete(ctx, ph) })
	if len(ph.Status.Checks) != 1 || ph.Status.Checks[0].Reason != contract.ReasonNotChecked || ph.Status.Checks[0].OK {
		t.Errorf("checks %+v, want one NotChecked", ph.Status.Checks)
	}
	if ready := meta.FindStatusCondition(ph.Status.Conditions, v1alpha1.ConditionReady); ready == nil || ready.Status != metav1.ConditionFalse || ready.Message != "failing: provider (NotChecked)" {
		t.Errorf("Ready %+v, want False naming the unchecked provider", ready)
	}
}

// Prune deletes the ProviderHealth of a provider no longer configured and
// keeps the others.
func TestProviderHealthOfARemovedProviderIsPruned(t *testing.T) {
	ctx := context.Background()
	entry, _ := set.Get(testProvider)
	h := &Checker{Client: k8s, Providers: set}
	if err := h.Check(ctx, entry); err != nil {
		t.Fatal(err)
	}
	var stale []*v1alpha1.ProviderHealth
	for _, name := range []string{"removed-from-config", "removed-too"} {
		ph := &v1alpha1.ProviderHealth{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := k8s.Create(ctx, ph); err != nil {
			t.Fatal(err)
		}
		stale = append(stale, ph)
	}
	if err := h.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ph := range stale {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ph), ph); client.IgnoreNotFound(err) != nil || err == nil {
			t.Errorf("the ProviderHealth of the removed provider %s survived Prune: %v", ph.Name, err)
		}
	}
	readHealth(t, testProvider) // the configured one stays
}

// listFails is the API client with every List failing.
type listFails struct{ client.Client }

func (listFails) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("the API server is away")
}

// Start prunes, then checks every provider at once and on its interval; it
// logs what failed (a prune, a ProviderHealth it could not write) and only
// that, and returns when ctx ends.
func TestHealthCheckerStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mem, _ := set.Get(testProvider)
	good := &providers.Entry{Name: testProvider, Type: mem.Type, Provider: mem.Provider, CheckInterval: 20 * time.Millisecond}
	bad := &providers.Entry{Name: "Not_A_Valid_Name", Type: mem.Type, Provider: mem.Provider, CheckInterval: 20 * time.Millisecond}
	h := &Checker{Client: listFails{k8s}, Providers: providers.NewSet(good, bad)}
	if !h.NeedLeaderElection() {
		t.Error("the health checker runs on every replica; want the leader only")
	}
	if err := h.Check(ctx, good); err != nil {
		t.Fatal(err)
	}
	backdate(t, readHealth(t, testProvider))

	done := make(chan error, 1)
	go func() { done <- h.Start(ctx) }()
	controllertest.Eventually(t, "a check round of "+testProvider, func() bool {
		return !readHealth(t, testProvider).Status.Checks[0].LastCheckTime.Equal(&longAgo)
	})
	controllertest.Eventually(t, "the failed prune is logged", func() bool {
		return logLines(`"msg"="pruning ProviderHealths of removed providers"`, "the API server is away") > 0
	})
	controllertest.Eventually(t, "the ProviderHealth it cannot write is logged", func() bool {
		return logLines(`"msg"="writing ProviderHealth"`, `"provider"="Not_A_Valid_Name"`) > 0
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return after its context ended")
	}
	if n := logLines(`"msg"="writing ProviderHealth"`, `"provider"="`+testProvider+`"`); n > 0 {
		t.Errorf("%d write failures logged for the provider whose ProviderHealth is written", n)
	}
}
