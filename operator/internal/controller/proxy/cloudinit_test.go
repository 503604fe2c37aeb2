package proxy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// A serving Proxy whose cloud-init Secret cannot be read for a moment (the
// API server answers 503) stays Ready, records the failure in lastError
// and an event, keeps its VM, and clears the error once the read works.
func TestTransientSecretReadKeepsServing(t *testing.T) {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "blip-user-data", Namespace: testNamespace},
		Data:       map[string][]byte{"user-data": []byte("#cloud-config\nhostname: blip\n")},
	}
	create(t, secret)
	p := newProxy(t, "blip", func(p *v1alpha1.Proxy) {
		p.Spec.CloudInit = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret.Name}, Key: "user-data"}
	})
	bootGuest(t, p, current)
	serving := waitReady(t, p).Status.Instance.ProviderID

	refused, restore := cutSecretReads(t, secret.Namespace, secret.Name)
	var got *v1alpha1.Proxy
	eventually(t, "the failed read is in status.lastError", func() bool {
		got = get(t, p)
		if c := readyCondition(got); c.Status != metav1.ConditionTrue {
			t.Fatalf("Ready %s (%s: %s) while only a read of the Secret failed", c.Status, c.Reason, c.Message)
		}
		return got.Status.LastError != nil
	})
	if e := got.Status.LastError; e.Class != string(contract.ClassTransient) || !strings.Contains(e.Message, `Secret "blip-user-data"`) {
		t.Errorf("lastError %+v: want class Transient naming the Secret", e)
	}
	eventually(t, "an event names the failed read", func() bool {
		return slicesContainPrefix(eventsFor(t, p), v1alpha1.ReasonCloudInitUnavailable+": ")
	})
	// Reconciles go on while the read fails: none of them replaces or
	// deletes the VM, nor makes the Proxy not Ready.
	before := refused()
	eventually(t, "two more reconciles meet the failed read", func() bool { return refused() >= before+2 })
	got = get(t, p)
	if c := readyCondition(got); c.Status != metav1.ConditionTrue || got.Status.Phase != v1alpha1.PhaseReady {
		t.Errorf("Ready %s, phase %s, while only a read of the Secret failed", c.Status, got.Status.Phase)
	}
	if got.Status.Replacement != nil || got.Status.Instance.ProviderID != serving {
		t.Errorf("instance %+v replacement %+v: want %s serving, no replacement", got.Status.Instance, got.Status.Replacement, serving)
	}
	if live := instancesOf(t, p); len(live) != 1 || live[0].ProviderID != serving {
		t.Errorf("instances %+v, want only %s", live, serving)
	}

	restore()
	eventually(t, "lastError clears once the Secret reads again", func() bool {
		got = get(t, p)
		return got.Status.LastError == nil && got.Status.Phase == v1alpha1.PhaseReady
	})
	if got.Status.Instance.ProviderID != serving {
		t.Errorf("serving %s after the blip, want %s", got.Status.Instance.ProviderID, serving)
	}
}
