package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
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
		if got := phaseOf(p); got != tc.want {
			t.Errorf("%s: phase %s, want %s", tc.name, got, tc.want)
		}
	}
}
