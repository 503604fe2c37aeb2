package contracttest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Lifecycle describes a provider's real-backend lifecycle test (template
// entry 21, backend-test: integration-tag): a real instance is created,
// becomes Running with an address, is found by its marks, and is deleted
// without a trace.
type Lifecycle struct {
	// Provider talks to the real backend.
	Provider contract.Provider
	// Request is the instance to make; its Name should say it is a test.
	Request contract.CreateRequest
	// Timeout bounds the wait for Running and for NotFound. Default 15 min.
	Timeout time.Duration
	// Probe, if set, is called with the Running instance's address, e.g. to
	// connect to the proxy port; an error fails the test.
	Probe func(ctx context.Context, ip string) error
}

// RunLifecycle runs l against the real backend. The instance is deleted
// at the end whatever happens.
func RunLifecycle(t *testing.T, l Lifecycle) {
	t.Helper()
	if l.Timeout == 0 {
		l.Timeout = 15 * time.Minute
	}
	ctx := logr.NewContext(context.Background(), testr.New(t))
	inst, err := l.Provider.Create(ctx, l.Request)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Logf("created %s", inst.ProviderID)
	t.Cleanup(func() {
		if err := l.Provider.Delete(context.WithoutCancel(ctx), inst.ProviderID); err != nil {
			t.Errorf("cleanup Delete(%s): %v", inst.ProviderID, err)
		}
		// What the operator releases once the Proxy's instances are gone.
		if k, ok := l.Provider.(contract.EgressKeeper); ok && k.KeepsEgress() {
			kept := contract.Egress{Region: l.Request.Placement.Region, UID: l.Request.UID, Replica: l.Request.Replica}
			if err := k.ReleaseEgress(context.WithoutCancel(ctx), kept); err != nil {
				t.Errorf("cleanup ReleaseEgress(%+v): %v", kept, err)
			}
		}
	})
	poll(t, l.Timeout, "Running", func() (bool, error) {
		got, err := l.Provider.Get(ctx, inst.ProviderID)
		if err != nil {
			return false, err
		}
		inst = got
		return got.State == contract.StateRunning, nil
	})
	if !contract.RoutableIPv4(inst.IP) || inst.UID != l.Request.UID {
		t.Fatalf("Running instance %+v: want a routable IPv4 and UID %s", inst, l.Request.UID)
	}
	if l.Probe != nil {
		if err := l.Probe(ctx, inst.IP); err != nil {
			t.Errorf("probe %s: %v", inst.IP, err)
		}
	}
	listed, err := l.Provider.ListByTag(ctx, contract.LabelUID, l.Request.UID)
	if err != nil || len(listed) != 1 || listed[0].ProviderID != inst.ProviderID {
		t.Errorf("ListByTag(%s) = %+v, %v; want exactly %s", l.Request.UID, listed, err, inst.ProviderID)
	}
	if err := l.Provider.Delete(ctx, inst.ProviderID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	poll(t, l.Timeout, "NotFound", func() (bool, error) {
		_, err := l.Provider.Get(ctx, inst.ProviderID)
		if errors.Is(err, contract.ErrNotFound) {
			return true, nil
		}
		return false, err
	})
}

// poll calls done every two seconds until it reports true, fails on a
// non-transient error, or times out.
func poll(t *testing.T, timeout time.Duration, what string, done func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := done()
		if ok {
			return
		}
		if err != nil && contract.ClassOf(err) != contract.ClassTransient {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not reached within %s (last error %v)", what, timeout, err)
		}
		time.Sleep(2 * time.Second)
	}
}
