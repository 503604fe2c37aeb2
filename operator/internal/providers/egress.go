package providers

import (
	"context"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// The wrappers answer for the provider they wrap (contract §3.1): a
// provider that is no contract.EgressKeeper keeps nothing, so its wrapper
// lists nothing and releases nothing, and the operator asks every entry
// the same way.

// Keeper is p's contract.EgressKeeper when p keeps egress addresses per
// replica (KeepsEgress), nil otherwise: the one question every part of
// the operator asks of an entry's provider.
func Keeper(p contract.Provider) contract.EgressKeeper {
	if k := egressOf(p); k != nil && k.KeepsEgress() {
		return k
	}
	return nil
}

// egressOf is p's EgressKeeper, nil when it is none.
func egressOf(p contract.Provider) contract.EgressKeeper {
	k, _ := p.(contract.EgressKeeper)
	return k
}

func (l *limited) KeepsEgress() bool {
	k := egressOf(l.inner)
	return k != nil && k.KeepsEgress()
}

func (l *limited) ListEgress(ctx context.Context, owner string) ([]contract.Egress, error) {
	k := egressOf(l.inner)
	if k == nil {
		return nil, nil
	}
	release, err := l.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	return k.ListEgress(ctx, owner)
}

func (l *limited) ReleaseEgress(ctx context.Context, e contract.Egress) error {
	k := egressOf(l.inner)
	if k == nil {
		return nil
	}
	release, err := l.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	return k.ReleaseEgress(ctx, e)
}

func (i *instrumented) KeepsEgress() bool {
	k := egressOf(i.inner)
	return k != nil && k.KeepsEgress()
}

func (i *instrumented) ListEgress(ctx context.Context, owner string) (out []contract.Egress, err error) {
	k := egressOf(i.inner)
	if k == nil {
		return nil, nil
	}
	err = i.do(ctx, "ListEgress", "", func(ctx context.Context) error {
		out, err = k.ListEgress(ctx, owner)
		return err
	})
	return out, err
}

func (i *instrumented) ReleaseEgress(ctx context.Context, e contract.Egress) error {
	k := egressOf(i.inner)
	if k == nil {
		return nil
	}
	return i.do(ctx, "ReleaseEgress", "", func(ctx context.Context) error {
		return k.ReleaseEgress(ctx, e)
	})
}
