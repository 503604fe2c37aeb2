package proxy

import (
	"context"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// A provider entry leaves the config while a Proxy on it serves: the Proxy
// says its VMs are kept; its deletion waits, saying why, and leaks
// nothing; no other entry's sweep takes its VM; and once the entry is back
// the restarted operator finishes the deletion.
func TestRemovedEntryKeepsItsVMsUntilItIsBack(t *testing.T) {
	ctx := context.Background()
	cloud, ctl := newSharedCloud()
	c := startCluster(t)
	first := startInstall(t, c, cloud, labAndOther, nil)
	p := proxyOn(t, c, "egress", "lab")
	vm := bootOn(t, c, ctl, p, current)
	readyOn(t, c, p)
	first.stop()

	second := startInstall(t, c, cloud, strings.Replace(labAndOther, "{name: lab, type: memory, memory: {regions: [r1]}}, ", "", 1), nil)
	if _, ok := second.set.Get("lab"); ok {
		t.Fatal("the entry is still configured")
	}
	eventually(t, "the Proxy says its entry is not configured and its VMs are kept", func() bool {
		cond := readyCondition(getOn(t, c, p))
		return cond.Reason == v1alpha1.ReasonProviderNotConfigured && strings.Contains(cond.Message, "its VMs, if any, are kept")
	})
	if err := c.client.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deletion waits, and the Proxy says why", func() bool {
		got := getOn(t, c, p)
		if got == nil {
			t.Fatalf("the Proxy was released while its VM %s lives", vm)
		}
		cond := readyCondition(got)
		return got.Status.Phase == v1alpha1.PhaseDeleting && cond.Status == metav1.ConditionFalse && cond.Reason == v1alpha1.ReasonProviderNotConfigured &&
			strings.Contains(cond.Message, "the deletion waits") && strings.Contains(cond.Message, "the finalizer "+v1alpha1.Finalizer+" is removed by hand")
	})
	eventually(t, "an event says the deletion waits", func() bool {
		return slices.ContainsFunc(eventsOn(t, c, p), func(e string) bool {
			return strings.HasPrefix(e, v1alpha1.ReasonProviderNotConfigured+": ") && strings.Contains(e, "the deletion waits")
		})
	})
	if got := getOn(t, c, p); got == nil || !controllerutil.ContainsFinalizer(got, v1alpha1.Finalizer) {
		t.Fatalf("the Proxy was released while its VM %s lives", vm)
	}
	if got := second.sweepLater(t, "other"); len(got) != 0 {
		t.Errorf("the other entry's sweep deleted %v", providerIDs(got))
	}
	if _, ok := vmOf(t, second.entry(t, "other"), vm); !ok {
		t.Fatalf("the VM %s of the removed entry is gone", vm)
	}
	second.stop()

	third := startInstall(t, c, cloud, labAndOther, nil)
	if third.id != first.id {
		t.Errorf("the install ID changed across restarts: %s, then %s", first.id, third.id)
	}
	eventually(t, "the Proxy is gone once its entry is back", func() bool { return getOn(t, c, p) == nil })
	if _, ok := vmOf(t, third.entry(t, "lab"), vm); ok {
		t.Errorf("the Proxy was released, its VM %s left behind", vm)
	}
}

// releaseByHand is what docs/operator.md tells a person to do for a Proxy
// whose entry is gone for good: remove the finalizer, knowingly leaving its
// VMs behind.
func releaseByHand(t *testing.T, c client.Client, p *v1alpha1.Proxy) {
	t.Helper()
	ctx := context.Background()
	_ = c.Delete(ctx, p)
	var got v1alpha1.Proxy
	gone := false
	eventually(t, p.Name+"'s deletion waits for its entry", func() bool {
		err := c.Get(ctx, client.ObjectKeyFromObject(p), &got)
		// Deleted before the reconciler added its finalizer: nothing holds it.
		gone = apierrors.IsNotFound(err)
		return gone || err == nil && strings.Contains(readyCondition(&got).Message, "the deletion waits")
	})
	if gone {
		return
	}
	// kubectl patch proxy <name> --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]'
	if err := c.Patch(ctx, &got, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`))); err != nil {
		t.Fatal(err)
	}
}

// The deletion that waits for its entry says so once, and again only when
// what it says changes: not at every reconcile that finds it still waiting.
func TestWaitingDeletionAnnouncedOnce(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Recorder: rec, Providers: &providers.Set{}}
	p := &v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orphaned"}, Spec: v1alpha1.ProxySpec{Provider: "gone"}}
	for i, want := range []int{1, 0, 0} {
		// Outside a reconcile the status is not written; the event is recorded before.
		_, _ = r.finalizeWithoutEntry(context.Background(), p)
		if got := len(rec.Events); got != want {
			t.Errorf("reconcile %d: %d events, want %d", i+1, got, want)
		}
		for len(rec.Events) > 0 {
			<-rec.Events
		}
	}
	p.Spec.Provider = "renamed"
	if _, _ = r.finalizeWithoutEntry(context.Background(), p); len(rec.Events) != 1 {
		t.Errorf("after the message changed: %d events, want 1", len(rec.Events))
	}
}
