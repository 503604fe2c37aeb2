package instances

import (
	"context"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// Swept is what one pass of a Proxy's deletion did.
type Swept struct {
	// Deleted are the instances it deleted.
	Deleted []contract.Instance
	// Released are the egress addresses it released (SweepAndRelease).
	Released []contract.Egress
	// Left are the instances listed after: terminating, or made since.
	Left []contract.Instance
	// Failed names the call that failed, when one did.
	Failed string
}

// Sweep deletes every instance of the Proxy of UID uid (Own: listed by
// its UID, and carrying it) whose name spare does not hold, and lists
// again. A Terminated one is deleted too, without being counted in
// Deleted: Delete returns nil for a deletion under way and finishes one a
// cut-off Delete left (Look). The list, not the status, says what exists:
// a Create cut off after it made its VM left no ID to delete by
// (docs/addresses.md).
func Sweep(ctx context.Context, prov contract.Provider, uid string, spare map[string]bool) (Swept, error) {
	var out Swept
	list := func() error {
		found, err := prov.ListByTag(ctx, contract.LabelUID, uid)
		if err != nil {
			out.Failed = "ListByTag"
			return err
		}
		out.Left = nil
		for _, inst := range Own(ctx, uid, found) {
			if !spare[inst.Name] {
				out.Left = append(out.Left, inst)
			}
		}
		return nil
	}
	if err := list(); err != nil {
		return out, err
	}
	if len(out.Left) == 0 {
		return out, nil
	}
	for _, inst := range out.Left {
		if err := prov.Delete(ctx, inst.ProviderID); err != nil {
			out.Failed = "Delete"
			return out, err
		}
		if inst.State != contract.StateTerminated {
			out.Deleted = append(out.Deleted, inst)
		}
	}
	// A provider whose Delete waits (delete-return: waits) is done
	// already: look again now rather than one poll later.
	return out, list()
}

// SweepAndRelease is Sweep, then, once none of the VMs it deletes is
// left, the release of the egress addresses the entry of owner mark owner
// keeps for the Proxy: replica k's, or every replica's when k < 0. A kept
// address outlives the replica's VMs (contract §3.1: Delete never releases
// it), so the Proxy's deletion and a replica scaled away release it, and
// only then: a VM still listed may still use it.
func SweepAndRelease(ctx context.Context, prov contract.Provider, owner, uid string, spare map[string]bool, k int) (Swept, error) {
	out, err := Sweep(ctx, prov, uid, spare)
	if err != nil || len(out.Left) > 0 {
		return out, err
	}
	keeper := providers.Keeper(prov)
	if keeper == nil {
		return out, nil
	}
	kept, err := keeper.ListEgress(ctx, owner)
	if err != nil {
		out.Failed = "ListEgress"
		return out, err
	}
	for _, e := range kept {
		if e.UID != uid || (k >= 0 && int(e.Replica) != k) {
			continue
		}
		if err := keeper.ReleaseEgress(ctx, e); err != nil {
			out.Failed = "ReleaseEgress"
			return out, err
		}
		out.Released = append(out.Released, e)
	}
	return out, nil
}

// Own keeps the instances of list that carry the Proxy UID uid; a
// provider that returned another (its filter is not exact) is logged, and
// the instance left alone.
func Own(ctx context.Context, uid string, list []contract.Instance) []contract.Instance {
	var own []contract.Instance
	for _, inst := range list {
		if CarriesUID(inst, uid) {
			own = append(own, inst)
			continue
		}
		logf.FromContext(ctx).Info("the provider listed an instance of another Proxy under this Proxy's UID; not deleting it",
			contract.LogKeyInstance, inst.Name, "providerID", inst.ProviderID, "instanceUID", inst.UID, "proxyUID", uid)
	}
	return own
}
