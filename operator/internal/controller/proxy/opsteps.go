package proxy

import (
	"context"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/images/cloudinit"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// What the Proxy reconciler's operations do in their goroutines: the
// provider calls of one step, and the probe, which is as slow as a
// backend when a booting VM swallows connections.

// observed is what an operation found of an instance, and what it did
// about it.
type observed struct {
	inst contract.Instance
	// probed is the probe's answer when inst runs: nil when its proxy
	// answers.
	probed error
	// stats are the counters the probe read, when it asked for them and
	// the proxy gave them.
	stats *cloudinit.Stats
	// deleteErr is what deleting inst answered when it had stopped.
	deleteErr error
}

// look ends an operation that found inst: a running instance is probed
// (the probe reaches only the VM, within its own timeout), and a stopped
// or terminated one deleted, to be created again. Delete is idempotent
// (contract §4.9): on an instance whose deletion is under way it returns
// nil, and it finishes one a cut-off Delete left, which on vSphere reads
// Terminated until a Delete completes it (its deleting mark, for up to
// taskTimeout+callTimeout). An instance that does not carry the Proxy's
// UID is neither probed nor deleted (the reconcile says so: notOwned).
// With stats, the probe reads the default tinyproxy's counters too.
func (r *Reconciler) look(ctx context.Context, prov contract.Provider, inst contract.Instance, uid string, port int32, stats bool) observed {
	seen := observed{inst: inst}
	if !carriesUID(inst, uid) {
		return seen
	}
	switch inst.State {
	case contract.StateRunning:
		seen.stats, seen.probed = r.Prober.Probe(ctx, inst.IP, port, stats)
	case contract.StateStopped, contract.StateTerminated:
		seen.deleteErr = prov.Delete(ctx, inst.ProviderID)
	}
	return seen
}

// servesStats reports whether the VM ref serves the statistics page: only
// one made from the default cloud-init this operator renders now (whose
// hash is current) does; any other proxy is asked for nothing it could
// forward or count as refused.
func servesStats(proxy *v1alpha1.Proxy, ref *v1alpha1.InstanceRef, current string) bool {
	return proxy.Spec.CloudInit == nil && current != "" && ref.CloudInitHash == current
}

// swept is what one pass of a Proxy's deletion did.
type swept struct {
	// deleted are the instances it deleted.
	deleted []contract.Instance
	// left are the instances listed after: terminating, or made since.
	left []contract.Instance
	// failed names the call that failed, when one did.
	failed string
}

// sweep deletes every instance of the Proxy (ownInstances: listed by its
// UID, and carrying it) whose name spare does not hold, and lists again.
// A Terminated one is deleted too, without an event: Delete returns nil
// for a deletion under way and finishes one a cut-off Delete left (look).
// The list, not the status, says what exists: a Create cut off after it
// made its VM left no ID to delete by (docs/addresses.md).
func sweep(ctx context.Context, prov contract.Provider, proxy *v1alpha1.Proxy, spare map[string]bool) (swept, error) {
	var out swept
	uid := string(proxy.UID)
	list := func() error {
		found, err := prov.ListByTag(ctx, contract.LabelUID, uid)
		if err != nil {
			out.failed = "ListByTag"
			return err
		}
		out.left = nil
		for _, inst := range ownInstances(ctx, proxy, found) {
			if !spare[inst.Name] {
				out.left = append(out.left, inst)
			}
		}
		return nil
	}
	if err := list(); err != nil {
		return out, err
	}
	if len(out.left) == 0 {
		return out, nil
	}
	for _, inst := range out.left {
		if err := prov.Delete(ctx, inst.ProviderID); err != nil {
			out.failed = "Delete"
			return out, err
		}
		if inst.State != contract.StateTerminated {
			out.deleted = append(out.deleted, inst)
		}
	}
	// A provider whose Delete waits (delete-return: waits) is done
	// already: look again now rather than one poll later.
	return out, list()
}
