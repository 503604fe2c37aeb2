package health

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// countingClient counts the status patches made through it and, when
// refuse is set, fails every create and patch.
type countingClient struct {
	client.Client
	statusPatches *atomic.Int32
	refuse        error
}

func (c countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if c.refuse != nil {
		return c.refuse
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if c.refuse != nil {
		return c.refuse
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c countingClient) Status() client.SubResourceWriter {
	return countingStatus{SubResourceWriter: c.Client.Status(), patches: c.statusPatches}
}

type countingStatus struct {
	client.SubResourceWriter
	patches *atomic.Int32
}

func (s countingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.patches.Add(1)
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// A round writes the status once: the first through its own patch (the
// create drops it), a later one through CreateOrPatch's.
func TestOneStatusWritePerRound(t *testing.T) {
	ctx := context.Background()
	mem, _ := set.Get(testProvider)
	entry := &providers.Entry{Name: "one-write", Type: "memory", Provider: struct{ contract.Provider }{mem.Provider}}
	var patches atomic.Int32
	h := &Checker{Client: countingClient{Client: k8s, statusPatches: &patches}, Providers: providers.NewSet(entry)}
	for round := 1; round <= 2; round++ {
		if round == 2 {
			// Old check times: the round must write its own, so
			// CreateOrPatch patches the status, and a second patch would
			// show.
			backdate(t, readHealth(t, entry.Name))
		}
		patches.Store(0)
		if err := h.Check(ctx, entry); err != nil {
			t.Fatal(err)
		}
		if n := patches.Load(); n != 1 {
			t.Errorf("round %d patched the status %d times, want once", round, n)
		}
		if round == 1 {
			t.Cleanup(func() { _ = k8s.Delete(ctx, &v1alpha1.ProviderHealth{ObjectMeta: metav1.ObjectMeta{Name: entry.Name}}) })
		}
	}
}

// CheckAll logs a round whose ProviderHealth could not be written, naming
// the provider, while the operator runs; a round written is not logged.
func TestCheckAllLogsAFailedWrite(t *testing.T) {
	ctx := context.Background()
	mem, _ := set.Get(testProvider)
	entry := &providers.Entry{Name: "refused-write", Type: "memory", Provider: struct{ contract.Provider }{mem.Provider}}
	var patches atomic.Int32
	refused := &Checker{Client: countingClient{Client: k8s, statusPatches: &patches, refuse: errors.New("stub: the API server refused the write")},
		Providers: providers.NewSet(entry)}
	refused.CheckAll(ctx)
	if n := logLines("writing ProviderHealth", `"provider"="refused-write"`, "the API server refused the write"); n != 1 {
		t.Errorf("%d log lines of the failed write, want 1:\n%s", n, logs)
	}
	written := &Checker{Client: k8s, Providers: providers.NewSet(&providers.Entry{Name: "fine-write", Type: "memory", Provider: entry.Provider})}
	written.CheckAll(ctx)
	t.Cleanup(func() {
		_ = k8s.Delete(ctx, &v1alpha1.ProviderHealth{ObjectMeta: metav1.ObjectMeta{Name: "fine-write"}})
	})
	if n := logLines("writing ProviderHealth", `"provider"="fine-write"`); n != 0 {
		t.Errorf("a written round was logged as failed:\n%s", logs)
	}
}

// deadlineChecker records the deadline its Check gets.
type deadlineChecker struct {
	contract.Provider
	deadline *time.Time
}

func (d deadlineChecker) Check(ctx context.Context) []contract.CheckResult {
	*d.deadline, _ = ctx.Deadline()
	return []contract.CheckResult{{Target: "credentials", OK: true, Reason: contract.ReasonOK}}
}

// A round may take the entry's whole checkInterval: a provider bounds each
// of its calls itself (OpenStack's callTimeout, 30 s by default, for each
// of a region's several checks), and a fixed 30 s for the round cut the
// later targets of a slow but healthy backend as timed out.
func TestARoundHasTheEntrysCheckInterval(t *testing.T) {
	ctx := context.Background()
	mem, _ := set.Get(testProvider)
	var deadline time.Time
	entry := &providers.Entry{Name: "slow-round", Type: "memory", CheckInterval: 5 * time.Minute,
		Provider: deadlineChecker{Provider: mem.Provider, deadline: &deadline}}
	t.Cleanup(func() { _ = k8s.Delete(ctx, &v1alpha1.ProviderHealth{ObjectMeta: metav1.ObjectMeta{Name: entry.Name}}) })
	start := time.Now()
	if err := (&Checker{Client: k8s, Providers: providers.NewSet(entry)}).Check(ctx, entry); err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	if deadline.Before(start.Add(entry.CheckInterval)) || deadline.After(end.Add(entry.CheckInterval)) {
		t.Errorf("the round's deadline is %s after its start; want the entry's checkInterval, %s", deadline.Sub(start).Round(time.Second), entry.CheckInterval)
	}
}
