package proxy

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// An upgrade whose default template differs from the one the serving VM
// was made with replaces nothing: the Proxy says its VM runs an older
// cloud-init, and the roll annotation replaces it when the user chooses.
// The test plays the upgrade by writing the status a v0.1 operator wrote
// for a VM made from another template: the spec hash over that template's
// bytes, no cloudInitHash. (On the v0.1 code the same status, a hash the
// running operator does not compute, started a replacement at once.)
func TestUpgradeWithANewTemplateReplacesNothing(t *testing.T) {
	p := newProxy(t, "upgrade-template", nil)
	bootGuest(t, p, current)
	served := waitReady(t, p).Status.Instance.DeepCopy()

	oldTemplate := []byte("#cloud-config\n# rendered by the v0.1 template\n")
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := get(t, p)
		got.Status.Instance.SpecHash = replica.LegacySpecHash(&got.Spec, oldTemplate)
		got.Status.Instance.CloudInitHash = ""
		return k8s.Status().Update(context.Background(), got)
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "CloudInitCurrent is False", func() bool {
		c := meta.FindStatusCondition(get(t, p).Status.Conditions, v1alpha1.ConditionCloudInitCurrent)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonTemplateChanged
	})
	// Several resyncs (300 ms each in the suite) later, still nothing replaced.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		got := get(t, p)
		if got.Status.Replacement != nil || got.Status.Instance.ProviderID != served.ProviderID || got.Status.Phase != v1alpha1.PhaseReady {
			t.Fatalf("after the upgrade: phase %s, instance %+v, replacement %+v; want the same VM serving alone", got.Status.Phase, got.Status.Instance, got.Status.Replacement)
		}
		if n := len(instancesOf(t, p)); n != 1 {
			t.Fatalf("%d instances after the upgrade, want 1", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	got := get(t, p)
	if got.Status.Instance.CloudInitHash != replica.UnknownCloudInit || got.Status.Instance.Name != served.Name {
		t.Errorf("carried-over instance %+v, want %s with cloudInitHash %q", got.Status.Instance, served.Name, replica.UnknownCloudInit)
	}

	// The user rolls it: one replacement, the old VM deleted, current again.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := get(t, p)
		metav1.SetMetaDataAnnotation(&got.ObjectMeta, v1alpha1.RollAnnotation, "2026-11-30")
		return k8s.Update(context.Background(), got)
	}); err != nil {
		t.Fatal(err)
	}
	bootGuest(t, p, replacement)
	eventually(t, "the rolled VM serves and is current", func() bool {
		got := get(t, p)
		return got.Status.Phase == v1alpha1.PhaseReady && got.Status.Replacement == nil && got.Status.Instance.ProviderID != served.ProviderID &&
			meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionCloudInitCurrent)
	})
	eventually(t, "the old VM is deleted", func() bool { return len(instancesOf(t, p)) == 1 })
}

// A v0.1 status is carried over unless the user's intent changed.
func TestAdoptLegacyHashes(t *testing.T) {
	const hash = "new-hash"
	rendered := []byte("#cloud-config\n")
	for _, tc := range []struct {
		name          string
		storedFrom    []byte // the cloud-init the stored legacy hash covers
		user          bool
		generationMov bool
		wantHash      string
		wantCloudInit string
	}{
		{"nothing changed", rendered, false, false, hash, replica.CloudInitHash(rendered)},
		{"nothing changed, user cloud-init", rendered, true, false, hash, replica.CloudInitHash(rendered)},
		{"only the template changed", []byte("old template"), false, false, hash, replica.UnknownCloudInit},
		{"the spec changed during the upgrade", []byte("old template"), false, true, "", ""},
		{"the user's cloud-init changed", []byte("old user data"), true, false, "", ""},
	} {
		p := &v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: v1alpha1.ProxySpec{Provider: "mem", Port: 3128}}
		p.Status.ObservedGeneration = 2
		if tc.generationMov {
			p.Generation = 3
		}
		legacy := replica.LegacySpecHash(&p.Spec, tc.storedFrom)
		p.Status.Instance = &v1alpha1.InstanceRef{Name: "vm", SpecHash: legacy}
		replica.AdoptLegacyHashes(p, hash, rendered, tc.user)
		want := tc.wantHash
		if want == "" {
			want = legacy
		}
		if got := p.Status.Instance; got.SpecHash != want || got.CloudInitHash != tc.wantCloudInit {
			t.Errorf("%s: instance %+v, want specHash %s cloudInitHash %q", tc.name, got, want, tc.wantCloudInit)
		}
	}
	// An instance this release recorded is never touched.
	p := &v1alpha1.Proxy{Status: v1alpha1.ProxyStatus{Instance: &v1alpha1.InstanceRef{SpecHash: "h1", CloudInitHash: "c1"}}}
	replica.AdoptLegacyHashes(p, hash, rendered, false)
	if p.Status.Instance.SpecHash != "h1" {
		t.Errorf("a current instance was re-hashed: %+v", p.Status.Instance)
	}
}
