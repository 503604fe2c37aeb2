package proxy

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest/memprovider"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

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
