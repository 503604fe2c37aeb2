package providers

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// keeper is a provider that keeps one egress address, and records what
// it was asked to release.
type keeper struct {
	heldLists
	keeps    bool
	released []contract.Egress
}

func (k *keeper) KeepsEgress() bool { return k.keeps }
func (k *keeper) ListEgress(context.Context, string) ([]contract.Egress, error) {
	return []contract.Egress{{Region: "r1", UID: "u", Replica: 1, Owner: "o", IP: "203.0.113.7"}}, nil
}
func (k *keeper) ReleaseEgress(_ context.Context, e contract.Egress) error {
	k.released = append(k.released, e)
	return nil
}

// The limits and the instrumentation answer for the provider they wrap
// (contract §3.1): KeepsEgress is the inner provider's, and ListEgress and
// ReleaseEgress reach it; a provider that keeps nothing is reported so,
// and its wrappers list nothing and release nothing.
func TestWrappersForwardEgress(t *testing.T) {
	wrap := func(p contract.Provider) contract.Provider {
		return Instrument("e", "test", Limit(p, Limits{QPS: 100, Burst: 100, Concurrency: 2}), noop.NewTracerProvider())
	}
	ctx := context.Background()
	for _, keeps := range []bool{true, false} {
		inner := &keeper{keeps: keeps}
		k, ok := wrap(inner).(contract.EgressKeeper)
		if !ok {
			t.Fatal("the wrapped provider is no contract.EgressKeeper")
		}
		if k.KeepsEgress() != keeps {
			t.Errorf("KeepsEgress = %v, the provider's is %v", k.KeepsEgress(), keeps)
		}
		list, err := k.ListEgress(ctx, "o")
		if err != nil || len(list) != 1 || list[0].IP != "203.0.113.7" {
			t.Errorf("ListEgress = %v, %v; want the provider's one address", list, err)
		}
		e := contract.Egress{Region: "r1", UID: "u", Replica: 1}
		if err := k.ReleaseEgress(ctx, e); err != nil || len(inner.released) != 1 || inner.released[0] != e {
			t.Errorf("ReleaseEgress = %v; the provider released %v, want %v", err, inner.released, e)
		}
	}
	plain, ok := wrap(&heldLists{}).(contract.EgressKeeper)
	if !ok {
		t.Fatal("the wrapped provider is no contract.EgressKeeper")
	}
	list, err := plain.ListEgress(ctx, "o")
	if plain.KeepsEgress() || len(list) != 0 || err != nil || plain.ReleaseEgress(ctx, contract.Egress{UID: "u"}) != nil {
		t.Errorf("a provider that keeps nothing: KeepsEgress %v, ListEgress %v, %v", plain.KeepsEgress(), list, err)
	}
}
