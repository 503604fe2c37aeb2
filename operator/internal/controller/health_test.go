package controller

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

func TestProviderHealthIsWrittenAndUpdated(t *testing.T) {
	ctx := context.Background()
	entry, _ := set.Get(testProvider)
	h := &HealthChecker{Client: k8s, Providers: set}
	read := func() *v1alpha1.ProviderHealth {
		t.Helper()
		var ph v1alpha1.ProviderHealth
		if err := k8s.Get(ctx, client.ObjectKey{Name: testProvider}, &ph); err != nil {
			t.Fatal(err)
		}
		return &ph
	}

	if err := h.Check(ctx, entry); err != nil {
		t.Fatal(err)
	}
	ph := read()
	if !meta.IsStatusConditionTrue(ph.Status.Conditions, v1alpha1.ConditionReady) || ph.Status.Type != "memory" {
		t.Fatalf("healthy provider: %+v", ph.Status)
	}
	var targets []string
	for _, c := range ph.Status.Checks {
		targets = append(targets, c.Target)
	}
	if len(targets) != 3 || targets[0] != "credentials" {
		t.Errorf("check targets %v, want credentials, region/r1, image/debian-12", targets)
	}
	firstTransition := ph.Status.Checks[0].LastTransitionTime

	control.RejectCredentials(true)
	defer control.RejectCredentials(false)
	if err := h.Check(ctx, entry); err != nil {
		t.Fatal(err)
	}
	ph = read()
	ready := meta.FindStatusCondition(ph.Status.Conditions, v1alpha1.ConditionReady)
	if ready.Status != metav1.ConditionFalse || ready.Reason != v1alpha1.ReasonChecksFailed {
		t.Errorf("Ready with the credential rejected: %+v", ready)
	}
	if c := ph.Status.Checks[0]; c.OK || c.Reason != contract.ReasonUnauthenticated || c.LastTransitionTime.Before(&firstTransition) {
		t.Errorf("credentials check with the credential rejected: %+v", c)
	}

	stale := &v1alpha1.ProviderHealth{ObjectMeta: metav1.ObjectMeta{Name: "removed-from-config"}}
	if err := k8s.Create(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if err := h.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(stale), stale); client.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("the ProviderHealth of a removed provider survived Prune: %v", err)
	}
	read() // the configured one stays
}
