package proxy

import (
	"context"
	"errors"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/images/cloudinit"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
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
	// deleted says inst had stopped and was deleted; deleteErr is what
	// the Delete answered.
	deleted   bool
	deleteErr error
}

// sight is how an operation looks at an instance (look).
type sight struct {
	// uid is the Proxy's: an instance without it is neither probed nor
	// deleted (the reconcile says so: notOwned).
	uid  string
	port int32
	// stats asks the default tinyproxy for its counters too.
	stats bool
	// serving says clients reach the instance through the Service beside
	// other replicas' VMs (servingBesideOthers). Its probe is then bounded
	// by servingProbeTimeout, and a stopped one is not deleted: the
	// reconcile takes it out of the Service first, and the next operation
	// deletes it, so a slow Delete (a vSphere power-off and destroy) does
	// not keep clients going to a dead VM.
	serving bool
}

// check is the operation that looks at a recorded instance: Get, then
// look, with the probe of a serving VM beside other replicas bounded by
// servingProbeTimeout. A VM that did not answer within it is asked
// for again: one that died while the probe ran (a Get just before the
// death said Running) is then found down in this operation, and its
// reconcile takes it out of the Service at once instead of counting one
// failed probe of three; the next operation deletes it (sight.serving).
// Only a NotFound from the second Get is an answer; another error leaves
// the failed probe to count.
func (r *Reconciler) check(ctx context.Context, prov contract.Provider, providerID string, how sight) (observed, error) {
	inst, err := prov.Get(ctx, providerID)
	if err != nil {
		return observed{}, err
	}
	seen := r.look(ctx, prov, inst, how)
	if seen.probed == nil || !how.serving {
		return seen, nil
	}
	again, err := prov.Get(ctx, providerID)
	if errors.Is(err, contract.ErrNotFound) {
		return observed{}, err
	}
	if err == nil && again.State != contract.StateRunning {
		return r.look(ctx, prov, again, how), nil
	}
	// Running still, or not known: the failed probe counts.
	return seen, nil
}

// servingProbeTimeout bounds a reconcile's probe of a VM that serves
// beside other replicas (sight.serving). A probe in flight when its VM dies
// waits out its timeout, since a dead VM never refuses, and only then is
// the VM asked for again: with the prober's own 5 s, a dead VM stayed 5.3 s
// in the Service in `make e2e` while the serving watch had found it within
// a second (docs/addresses.md, "Failover"). A live VM answers its probe
// on the backend's network in milliseconds, and three failures in a row
// still decide that one is unreachable.
const servingProbeTimeout = time.Second

// servingBesideOthers reports whether ro's instance serves clients beside
// other replicas' VMs, which can take them when it fails. Any other keeps
// the prober's own timeout and is deleted as soon as it is found stopped:
// a lone replica has no other VM to take its clients, and a VM that does
// not serve yet may be slow to answer while it boots.
func servingBesideOthers(proxy *v1alpha1.Proxy, ro role) bool {
	return replica.Multi(proxy) && serving(proxy, ro)
}

// look ends an operation that found inst: a running instance is probed
// (the probe reaches only the VM, within its own timeout), and a stopped
// or terminated one deleted, to be created again, unless it serves
// (sight.serving). Delete is idempotent (contract §4.9): on an instance
// whose deletion is under way it returns nil, and it finishes one a
// cut-off Delete left, which on vSphere reads Terminated until a Delete
// completes it (its deleting mark, for up to taskTimeout+callTimeout).
func (r *Reconciler) look(ctx context.Context, prov contract.Provider, inst contract.Instance, how sight) observed {
	seen := observed{inst: inst}
	if !carriesUID(inst, how.uid) {
		return seen
	}
	switch inst.State {
	case contract.StateRunning:
		pctx := ctx
		if how.serving {
			var cancel context.CancelFunc
			pctx, cancel = context.WithTimeout(ctx, servingProbeTimeout)
			defer cancel()
		}
		seen.stats, seen.probed = r.Prober.Probe(pctx, inst.IP, how.port, how.stats)
	case contract.StateStopped, contract.StateTerminated:
		if !how.serving {
			seen.deleted, seen.deleteErr = true, prov.Delete(ctx, inst.ProviderID)
		}
	}
	return seen
}

// swept is what one pass of a Proxy's deletion did.
type swept struct {
	// deleted are the instances it deleted.
	deleted []contract.Instance
	// released are the egress addresses it released (sweepAndRelease).
	released []contract.Egress
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

// sweepAndRelease is sweep, then, once none of the VMs it deletes is left,
// the release of the egress addresses the entry keeps for the Proxy:
// replica k's, or every replica's when k < 0. A kept address outlives the
// replica's VMs (contract §3.1: Delete never releases it), so the Proxy's
// deletion and a replica scaled away release it, and only then: a VM
// still listed may still use it.
func sweepAndRelease(ctx context.Context, prov contract.Provider, owner string, proxy *v1alpha1.Proxy, spare map[string]bool, k int) (swept, error) {
	out, err := sweep(ctx, prov, proxy, spare)
	if err != nil || len(out.left) > 0 {
		return out, err
	}
	keeper := providers.Keeper(prov)
	if keeper == nil {
		return out, nil
	}
	kept, err := keeper.ListEgress(ctx, owner)
	if err != nil {
		out.failed = "ListEgress"
		return out, err
	}
	for _, e := range kept {
		if e.UID != string(proxy.UID) || (k >= 0 && int(e.Replica) != k) {
			continue
		}
		if err := keeper.ReleaseEgress(ctx, e); err != nil {
			out.failed = "ReleaseEgress"
			return out, err
		}
		out.released = append(out.released, e)
	}
	return out, nil
}
