package proxy

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller/gc"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller/health"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/identity"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metrics"
)

// The providers configs of these tests; every entry talks to the test's
// shared Cloud.
const (
	labOnly      = "providers: [{name: lab, type: memory, memory: {regions: [r1]}}]"
	labAndOther  = "providers: [{name: lab, type: memory, memory: {regions: [r1]}}, {name: other, type: memory, memory: {regions: [r1]}}]"
	anotherUID   = "0b7f8e7e-5a0c-4c43-9d2e-6f0e2b1a7c55"
	anotherOwner = "feedf00d-lab"
)

// Two clusters, each with its operator and the same entry name, share one
// backend. Each install derives its own ID from its cluster, marks its VMs
// with it, and its garbage collector, sweeping as if every VM were past
// gc.minAge, deletes only its own leftovers: never the other's serving VM,
// nor a VM with v0.1's marks whose Proxy it does not have.
func TestTwoInstallsOnOneBackendDeleteNothingOfEachOther(t *testing.T) {
	cloud, ctl := newSharedCloud()
	ca, cb := startCluster(t), startCluster(t)
	a, b := startInstall(t, ca, cloud, labOnly, nil), startInstall(t, cb, cloud, labOnly, nil)
	for _, in := range []*install{a, b} {
		var ns corev1.Namespace
		if err := in.cluster.client.Get(context.Background(), client.ObjectKey{Name: identity.ClusterNamespace}, &ns); err != nil {
			t.Fatal(err)
		}
		if want := strings.ReplaceAll(string(ns.UID), "-", "")[:8]; in.id != want {
			t.Errorf("install ID %q, want %q: the first 8 hex digits of kube-system's UID %s", in.id, want, ns.UID)
		}
	}
	if a.id == b.id {
		t.Fatalf("both clusters derived install ID %q", a.id)
	}

	pa, pb := proxyOn(t, ca, "egress", "lab"), proxyOn(t, cb, "egress", "lab")
	ida, idb := bootOn(t, ca, ctl, pa, current), bootOn(t, cb, ctl, pb, current)
	readyOn(t, ca, pa)
	readyOn(t, cb, pb)
	ea, eb := a.entry(t, "lab"), b.entry(t, "lab")
	for id, want := range map[string]string{ida: a.id + "-lab", idb: b.id + "-lab"} {
		if inst, _ := vmOf(t, ea, id); inst.Owner != want {
			t.Errorf("instance %s is marked %q, want %q", id, inst.Owner, want)
		}
	}

	// Each install's own leftovers still go: an orphan of A's, and a VM
	// with v0.1's marks of B's Proxy, which B no longer wants.
	orphanOfA := markedVM(t, cloud, ctl, "orphan-of-a", ea.Owner, "6f1c2b7e-0000-4000-8000-00000000000a")
	legacyOfB := markedVM(t, cloud, ctl, "legacy-of-b", contract.LegacyManagedValue, string(pb.UID))

	if got := providerIDs(a.sweepLater(t, "lab")); !slices.Equal(got, []string{orphanOfA}) {
		t.Errorf("install A's sweep deleted %v; want only its own orphan %s", got, orphanOfA)
	}
	if got := providerIDs(b.sweepLater(t, "lab")); !slices.Equal(got, []string{legacyOfB}) {
		t.Errorf("install B's sweep deleted %v; want only the v0.1 leftover of its Proxy, %s", got, legacyOfB)
	}
	for c, p := range map[*cluster]*v1alpha1.Proxy{ca: pa, cb: pb} {
		id := getOn(t, c, p).Status.Instance.ProviderID
		if _, ok := vmOf(t, eb, id); !ok {
			t.Errorf("the serving instance %s of a Proxy was deleted", id)
		}
		if got := getOn(t, c, p); got.Status.Phase != v1alpha1.PhaseReady {
			t.Errorf("Proxy %s is %s after the sweeps, want Ready", p.Name, got.Status.Phase)
		}
	}
}

// Two entries of one install on one backend: each entry's sweep leaves the
// other's VMs, which carry the other's owner mark. The ProviderHealth of
// each says which mark its VMs carry.
func TestTwoEntriesOnOneBackendDeleteNothingOfEachOther(t *testing.T) {
	ctx := context.Background()
	cloud, ctl := newSharedCloud()
	c := startCluster(t)
	in := startInstall(t, c, cloud, "installID: lab1\n"+strings.ReplaceAll(strings.ReplaceAll(labAndOther, "lab,", "blue,"), "other,", "green,"), nil)
	blue, green := proxyOn(t, c, "blue", "blue"), proxyOn(t, c, "green", "green")
	ids := map[string]string{"blue": bootOn(t, c, ctl, blue, current), "green": bootOn(t, c, ctl, green, current)}
	readyOn(t, c, blue)
	readyOn(t, c, green)
	for name, id := range ids {
		if inst, _ := vmOf(t, in.entry(t, name), id); inst.Owner != "lab1-"+name {
			t.Errorf("the instance of %s is marked %q, want %q", name, inst.Owner, "lab1-"+name)
		}
	}

	for _, name := range []string{"blue", "green"} {
		if got := in.sweepLater(t, name); len(got) != 0 {
			t.Errorf("the sweep of entry %s deleted %v; want nothing", name, providerIDs(got))
		}
	}
	for name, id := range ids {
		if _, ok := vmOf(t, in.entry(t, name), id); !ok {
			t.Errorf("the serving instance %s of %s was deleted", id, name)
		}
	}

	h := &health.Checker{Client: c.client, Providers: in.set}
	if err := h.Check(ctx, in.entry(t, "blue")); err != nil {
		t.Fatal(err)
	}
	var ph v1alpha1.ProviderHealth
	if err := c.client.Get(ctx, client.ObjectKey{Name: "blue"}, &ph); err != nil {
		t.Fatal(err)
	}
	if ph.Status.Owner != "lab1-blue" {
		t.Errorf("ProviderHealth blue shows owner %q, want lab1-blue", ph.Status.Owner)
	}
}

// Upgrading from v0.1, whose marks name no owner: a serving VM with the old
// marks keeps serving and is deleted with its Proxy; an old leftover of a
// Proxy here on this entry is collected (by the legacy pass), while one of
// no Proxy here — maybe another cluster's — or of a Proxy on another entry
// is not.
func TestLegacyMarksAreAdoptedOnlyForThisClustersProxies(t *testing.T) {
	ctx := context.Background()
	cloud, ctl := newSharedCloud()
	c := startCluster(t)
	in := startInstall(t, c, cloud, "installID: up1\n"+labAndOther, nil)
	p := proxyOn(t, c, "egress", "lab")
	bootOn(t, c, ctl, p, current)
	served := readyOn(t, c, p).Status.Instance
	in.stop()

	// What v0.1 made: the same VM, marked managed=true.
	if err := cloud.DeleteVM(ctx, sharedToken, "r1", served.Name); err != nil {
		t.Fatal(err)
	}
	markedVM(t, cloud, ctl, served.Name, contract.LegacyManagedValue, string(p.UID))
	q := proxyOn(t, c, "q", "other")
	in = startInstall(t, c, cloud, "installID: up1\n"+labAndOther, nil)
	bootOn(t, c, ctl, q, current)
	readyOn(t, c, q)
	eventually(t, "the Proxy serves from its v0.1 VM at its new address", func() bool {
		got := getOn(t, c, p)
		inst, _ := vmOf(t, in.entry(t, "lab"), served.ProviderID)
		return got.Status.Phase == v1alpha1.PhaseReady && got.Status.Instance.IP == inst.IP && inst.Owner == contract.LegacyManagedValue
	})

	leftoverOfP := markedVM(t, cloud, ctl, "egress-v01-leftover", contract.LegacyManagedValue, string(p.UID))
	ofNoProxyHere := markedVM(t, cloud, ctl, "v01-of-another-cluster", contract.LegacyManagedValue, anotherUID)
	leftoverOfQ := markedVM(t, cloud, ctl, "q-v01-leftover", contract.LegacyManagedValue, string(q.UID))
	metric := func() float64 {
		return testutil.ToFloat64(metrics.GCDeletions.WithLabelValues("lab", "superseded", gc.PassLegacy))
	}
	before := metric()
	if got := providerIDs(in.sweepLater(t, "lab")); !slices.Equal(got, []string{leftoverOfP}) {
		t.Errorf("the sweep of lab deleted %v; want only %s", got, leftoverOfP)
	}
	if got := providerIDs(in.sweepLater(t, "other")); !slices.Equal(got, []string{leftoverOfQ}) {
		t.Errorf("the sweep of other deleted %v; want only %s", got, leftoverOfQ)
	}
	if got := metric() - before; got != 1 {
		t.Errorf("gc deletions{lab, superseded, legacy} grew by %v, want 1", got)
	}
	for _, id := range []string{served.ProviderID, ofNoProxyHere} {
		if _, ok := vmOf(t, in.entry(t, "lab"), id); !ok {
			t.Errorf("%s was deleted", id)
		}
	}

	if err := c.client.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Proxy is gone", func() bool { return getOn(t, c, p) == nil })
	if _, ok := vmOf(t, in.entry(t, "lab"), served.ProviderID); ok {
		t.Errorf("the Proxy's v0.1 VM %s outlived it", served.ProviderID)
	}
}
