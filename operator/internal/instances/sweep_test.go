package instances

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest/memprovider"
)

const (
	testToken = "sentinel-credential-5e1f0c"
	testOwner = "test-mem"
	sweepUID  = "6f1c1b0e-0000-4000-8000-000000000001"
)

// newCloud is a memory provider of one region, keeping egress addresses
// when egress is set, and its control.
func newCloud(t *testing.T, egress bool) (*memprovider.Provider, memprovider.Control) {
	t.Helper()
	cloud := memprovider.NewCloud(testToken, []string{"r1"}, []string{"debian-12-proxy"}, 0)
	prov, err := memprovider.New(memprovider.Config{
		Token: testToken, Regions: []string{"r1"},
		MachineTypes: map[string]memprovider.MachineType{"small": {CPUs: 1, MemoryMiB: 512}},
		Images:       map[string]string{"debian-12": "debian-12-proxy"},
		Egress:       egress,
	}, cloud)
	if err != nil {
		t.Fatal(err)
	}
	return prov, memprovider.Control{Cloud: cloud}
}

// createVM makes replica k's VM name for the Proxy of UID uid.
func createVM(t *testing.T, prov contract.Provider, uid, name string, k int32) contract.Instance {
	t.Helper()
	inst, err := prov.Create(context.Background(), contract.CreateRequest{Name: name, UID: uid, Owner: testOwner, Port: 3128, Replica: k,
		Placement: contract.Placement{Region: "r1", MachineType: "small", Image: "debian-12"}})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return inst
}

func providerIDs(insts []contract.Instance) []string {
	out := make([]string, len(insts))
	for i, inst := range insts {
		out[i] = inst.ProviderID
	}
	return out
}

// A sweep deletes every VM of the Proxy, a Terminated one too (finishing
// what a cut-off Delete began), but announces only the ones it deleted:
// a VM already being deleted gets no second "deleting" event.
func TestSweepAnnouncesOnlyWhatItDeleted(t *testing.T) {
	ctx := context.Background()
	prov, ctl := newCloud(t, false)
	running := createVM(t, prov, sweepUID, "sweep-a", 0)
	leaving := createVM(t, prov, sweepUID, "sweep-b", 0)
	finish, err := ctl.BeginDelete(ctx, leaving.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(finish)

	out, err := Sweep(ctx, prov, sweepUID, nil)
	if err != nil {
		t.Fatalf("sweep: %v (failed %s)", err, out.Failed)
	}
	if len(out.Deleted) != 1 || out.Deleted[0].ProviderID != running.ProviderID {
		t.Errorf("announced %v, want only %s (%s was being deleted already)", providerIDs(out.Deleted), running.ProviderID, leaving.ProviderID)
	}
}

// inexactFilter is a provider whose ListByTag also returns the instances
// of extra, as a backend whose tag filter is a prefix or a search might.
type inexactFilter struct {
	contract.Provider
	extra []contract.Instance
}

func (p inexactFilter) ListByTag(ctx context.Context, key, value string) ([]contract.Instance, error) {
	found, err := p.Provider.ListByTag(ctx, key, value)
	return append(found, p.extra...), err
}

// A sweep deletes only what carries the Proxy's UID: an instance the
// provider listed under it but marked with another UID is left alone, and
// a name spare holds is kept.
func TestSweepDeletesOnlyTheProxysOwnInstances(t *testing.T) {
	ctx := context.Background()
	mem, _ := newCloud(t, false)
	other := createVM(t, mem, "6f1c1b0e-0000-4000-8000-000000000002", "other-a", 0)
	mine := createVM(t, mem, sweepUID, "sweep-a", 0)
	kept := createVM(t, mem, sweepUID, "sweep-b", 1)
	prov := inexactFilter{Provider: mem, extra: []contract.Instance{other}}

	out, err := Sweep(ctx, prov, sweepUID, map[string]bool{kept.Name: true})
	if err != nil {
		t.Fatalf("sweep: %v (failed %s)", err, out.Failed)
	}
	if got := providerIDs(out.Deleted); !slices.Equal(got, []string{mine.ProviderID}) {
		t.Errorf("deleted %v, want only %s", got, mine.ProviderID)
	}
	for _, inst := range []contract.Instance{other, kept} {
		if _, err := mem.Get(ctx, inst.ProviderID); err != nil {
			t.Errorf("%s: %v; want it left alone", inst.Name, err)
		}
	}
}

// SweepAndRelease releases the egress address kept for replica k (every
// replica's for k < 0) once none of the VMs it swept is listed, and no
// other Proxy's or replica's.
func TestSweepAndReleaseReleasesOnlyWhatTheSweepFreed(t *testing.T) {
	ctx := context.Background()
	prov, _ := newCloud(t, true)
	createVM(t, prov, sweepUID, "sweep-a", 0)
	createVM(t, prov, sweepUID, "sweep-b", 1)
	const other = "6f1c1b0e-0000-4000-8000-000000000002"
	createVM(t, prov, other, "other-a", 1)
	// kept names each address kept as UID/replica, sorted.
	kept := func() []string {
		t.Helper()
		all, err := prov.ListEgress(ctx, testOwner)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range all {
			out = append(out, fmt.Sprintf("%s/%d", e.UID, e.Replica))
		}
		slices.Sort(out)
		return out
	}
	if got := kept(); len(got) != 3 {
		t.Fatalf("kept %v, want 3 addresses", got)
	}

	out, err := SweepAndRelease(ctx, prov, testOwner, sweepUID, map[string]bool{"sweep-a": true}, 1)
	if err != nil {
		t.Fatalf("sweep of replica 1: %v (failed %s)", err, out.Failed)
	}
	if len(out.Released) != 1 || out.Released[0].UID != sweepUID || out.Released[0].Replica != 1 {
		t.Errorf("sweep of replica 1 released %v, want only its address", out.Released)
	}
	if got, want := kept(), []string{sweepUID + "/0", other + "/1"}; !slices.Equal(got, want) {
		t.Errorf("kept after the sweep of replica 1: %v, want %v", got, want)
	}

	out, err = SweepAndRelease(ctx, prov, testOwner, sweepUID, nil, -1)
	if err != nil {
		t.Fatalf("sweep of the Proxy: %v (failed %s)", err, out.Failed)
	}
	if len(out.Released) != 1 || out.Released[0].Replica != 0 {
		t.Errorf("sweep of the Proxy released %v, want replica 0's address", out.Released)
	}
	if got, want := kept(), []string{other + "/1"}; !slices.Equal(got, want) {
		t.Errorf("kept after the Proxy's sweep: %v, want %v", got, want)
	}
}

// While a swept VM is still listed (its Delete under way), its address is
// kept: the VM may still use it.
func TestSweepAndReleaseKeepsTheAddressWhileAVMIsListed(t *testing.T) {
	ctx := context.Background()
	prov, ctl := newCloud(t, true)
	vm := createVM(t, prov, sweepUID, "sweep-a", 0)
	finish, err := ctl.BeginDelete(ctx, vm.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(finish)

	out, err := SweepAndRelease(ctx, prov, testOwner, sweepUID, nil, -1)
	if err != nil {
		t.Fatalf("sweep: %v (failed %s)", err, out.Failed)
	}
	if len(out.Left) != 1 || len(out.Released) != 0 {
		t.Errorf("left %v and released %v; want the terminating VM left and nothing released", providerIDs(out.Left), out.Released)
	}
}
