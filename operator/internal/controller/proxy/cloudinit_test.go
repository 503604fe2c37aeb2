package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controllertest"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/userdata"
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

// A Secret the operator may not read is said once — on Provisioned, which
// a serving Proxy keeps Ready beside — and not at each poll that finds it
// still forbidden; a Secret that is missing is not mistaken for one the
// operator may not read.
func TestForbiddenCloudInitAnnouncedOnce(t *testing.T) {
	reviews := fake.NewClientBuilder().WithScheme(controllertest.Scheme()).Build()
	forbidden := &userdata.ReadError{Secret: "user-data", Err: apierrors.NewForbidden(corev1.Resource("secrets"), "user-data", errors.New("RBAC"))}
	missing := &userdata.ReadError{Secret: "user-data", Err: apierrors.NewNotFound(corev1.Resource("secrets"), "user-data")}
	serving := &v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "serving"}}
	serving.Status.Instance = &v1alpha1.InstanceRef{Name: "serving-0", IP: "192.0.2.9"}
	replica.MarkReady(serving)
	for _, tc := range []struct {
		name  string
		proxy *v1alpha1.Proxy
		ready bool
	}{
		{"a serving Proxy", serving, true},
		{"a Proxy not ready yet", &v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "new"}}, false},
	} {
		rec := events.NewFakeRecorder(10)
		r := &Reconciler{Recorder: rec, userdata: &userdata.Reader{Reviews: reviews}}
		for i, want := range []int{1, 0, 0} {
			// Outside a reconcile the status is not written; the event is recorded before.
			_, _ = r.cloudInitError(context.Background(), tc.proxy, forbidden)
			if got := len(rec.Events); got != want {
				t.Errorf("%s, poll %d: %d events, want %d", tc.name, i+1, got, want)
			}
			for len(rec.Events) > 0 {
				<-rec.Events
			}
		}
		if c := meta.FindStatusCondition(tc.proxy.Status.Conditions, v1alpha1.ConditionProvisioned); c == nil || c.Reason != v1alpha1.ReasonCloudInitForbidden ||
			!strings.Contains(c.Message, "kubectl -n team create rolebinding") {
			t.Errorf("%s: Provisioned = %+v, want %s naming the RoleBinding", tc.name, c, v1alpha1.ReasonCloudInitForbidden)
		}
		if got := meta.IsStatusConditionTrue(tc.proxy.Status.Conditions, v1alpha1.ConditionReady); got != tc.ready {
			t.Errorf("%s: Ready = %v, want %v", tc.name, got, tc.ready)
		}
	}

	p := &v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "missing"}}
	r := &Reconciler{Recorder: events.NewFakeRecorder(10), userdata: &userdata.Reader{Reviews: reviews}}
	_, _ = r.cloudInitError(context.Background(), p, missing)
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonCloudInitUnavailable {
		t.Errorf("a missing Secret: Ready = %+v, want %s", c, v1alpha1.ReasonCloudInitUnavailable)
	}
}
