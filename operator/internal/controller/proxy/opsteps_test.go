package proxy

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest/memprovider"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// Only a VM made from the default cloud-init this operator renders now
// serves the statistics page: one made by an older operator's template, or
// from the user's own cloud-init (even unchanged since), is asked for
// nothing it might forward to its upstream or count as a refusal.
func TestServesStatsOnlyTheCurrentDefaultCloudInit(t *testing.T) {
	const current = "sha256:now"
	defaults := &v1alpha1.Proxy{}
	own := &v1alpha1.Proxy{Spec: v1alpha1.ProxySpec{CloudInit: &corev1.SecretKeySelector{Key: "user-data"}}}
	for _, tc := range []struct {
		name    string
		proxy   *v1alpha1.Proxy
		hash    string
		current string
		want    bool
	}{
		{"default cloud-init, current", defaults, current, current, true},
		{"default cloud-init of an older template", defaults, "sha256:then", current, false},
		{"default cloud-init, nothing rendered", defaults, "", "", false},
		{"the user's cloud-init, unchanged", own, current, current, false},
		{"the user's cloud-init, changed", own, "sha256:then", current, false},
	} {
		ref := &v1alpha1.InstanceRef{CloudInitHash: tc.hash}
		if got := servesStats(tc.proxy, ref, tc.current); got != tc.want {
			t.Errorf("%s: servesStats = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A sweep deletes every VM of the Proxy, a Terminated one too (finishing
// what a cut-off Delete began), but announces only the ones it deleted:
// a VM already being deleted gets no second "deleting" event.
func TestSweepAnnouncesOnlyWhatItDeleted(t *testing.T) {
	ctx := context.Background()
	cloud := memprovider.NewCloud(testToken, []string{"r1"}, []string{"debian-12-proxy"}, 0)
	ctl := memprovider.Control{Cloud: cloud}
	prov, err := memprovider.New(memprovider.Config{
		Token: testToken, Regions: []string{"r1"},
		MachineTypes: map[string]memprovider.MachineType{"small": {CPUs: 1, MemoryMiB: 512}},
		Images:       map[string]string{"debian-12": "debian-12-proxy"},
	}, cloud)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "sweep", UID: types.UID("6f1c1b0e-0000-4000-8000-000000000001")}}
	createVM := func(name string) contract.Instance {
		inst, err := prov.Create(ctx, contract.CreateRequest{Name: name, UID: string(proxy.UID), Owner: "test-mem", Port: 3128,
			Placement: contract.Placement{Region: "r1", MachineType: "small", Image: "debian-12"}})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		return inst
	}
	running := createVM("sweep-a")
	leaving := createVM("sweep-b")
	finish, err := ctl.BeginDelete(ctx, leaving.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(finish)

	out, err := sweep(ctx, prov, proxy, nil)
	if err != nil {
		t.Fatalf("sweep: %v (failed %s)", err, out.failed)
	}
	if len(out.deleted) != 1 || out.deleted[0].ProviderID != running.ProviderID {
		t.Errorf("announced %v, want only %s (%s was being deleted already)", providerIDs(out.deleted), running.ProviderID, leaving.ProviderID)
	}
}
