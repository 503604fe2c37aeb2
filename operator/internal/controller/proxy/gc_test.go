package proxy

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller/gc"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metrics"
)

func TestGarbageCollectorDeletesOnlyOldUnwantedInstances(t *testing.T) {
	ctx := context.Background()
	live := newProxy(t, "gc-live", nil)
	bootGuest(t, live, current)
	liveID := waitReady(t, live).Status.Instance.ProviderID
	entry, _ := set.Get(testProvider)

	create := func(name, uid string) string {
		t.Helper()
		inst, err := entry.Provider.Create(ctx, contract.CreateRequest{
			Name: name, UID: uid, Owner: entry.Owner, Port: 3128, CloudInit: []byte("#cloud-config\n"),
			Placement: contract.Placement{Region: "r1", MachineType: "small", Image: "debian-12"},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = entry.Provider.Delete(ctx, inst.ProviderID) })
		return inst.ProviderID
	}
	orphan := create("gc-orphan", "6f1c2b7e-0000-4000-8000-000000000001")
	superseded := create("gc-live-superseded", string(get(t, live).UID))

	collector := &gc.Collector{Reader: k8s, Providers: set}
	young, err := collector.Sweep(ctx, entry)
	if err != nil {
		t.Fatal(err)
	}
	if len(young) != 0 {
		t.Fatalf("deleted %d instances younger than MinAge (%s): %+v", len(young), entry.GC.MinAge, young)
	}

	before := testutil.ToFloat64(metrics.GCDeletions.WithLabelValues(testProvider, "orphan", gc.PassOwned))
	collector.Now = func() time.Time { return time.Now().Add(entry.GC.MinAge + time.Minute) }
	old, err := collector.Sweep(ctx, entry)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(old))
	for i, inst := range old {
		ids[i] = inst.ProviderID
	}
	for _, want := range []string{orphan, superseded} {
		if !slices.Contains(ids, want) {
			t.Errorf("%s was not collected (collected %v)", want, ids)
		}
	}
	if slices.Contains(ids, liveID) {
		t.Fatalf("the live Proxy's instance %s was collected", liveID)
	}
	if _, err := entry.Provider.Get(ctx, liveID); err != nil {
		t.Errorf("the live instance: %v", err)
	}
	for _, id := range []string{orphan, superseded} {
		if inst, err := entry.Provider.Get(ctx, id); err == nil && inst.State != contract.StateTerminated {
			t.Errorf("%s still %s after collection", id, inst.State)
		} else if err != nil && !errors.Is(err, contract.ErrNotFound) {
			t.Error(err)
		}
	}
	if got := testutil.ToFloat64(metrics.GCDeletions.WithLabelValues(testProvider, "orphan", gc.PassOwned)) - before; got < 1 {
		t.Errorf("gc deletions metric for orphans grew by %v, want at least 1", got)
	}
}
