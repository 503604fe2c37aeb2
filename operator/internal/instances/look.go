package instances

import (
	"context"
	"errors"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/images/cloudinit"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/probe"
)

// Observed is what an operation found of an instance, and what it did
// about it.
type Observed struct {
	Inst contract.Instance
	// Probed is the probe's answer when Inst runs: nil when its proxy
	// answers.
	Probed error
	// Stats are the counters the probe read, when it asked for them and
	// the proxy gave them.
	Stats *cloudinit.Stats
	// Deleted says Inst had stopped and was deleted; DeleteErr is what
	// the Delete answered.
	Deleted   bool
	DeleteErr error
}

// Sight is how an operation looks at an instance (Look).
type Sight struct {
	Prober probe.Prober
	// UID is the Proxy's: an instance without it is neither probed nor
	// deleted (the reconcile says so).
	UID  string
	Port int32
	// Stats asks the default tinyproxy for its counters too.
	Stats bool
	// Serving says clients reach the instance through the Service beside
	// other replicas' VMs. Its probe is then bounded by
	// ServingProbeTimeout, and a stopped one is not deleted: the reconcile
	// takes it out of the Service first, and the next operation deletes
	// it, so a slow Delete (a vSphere power-off and destroy) does not keep
	// clients going to a dead VM.
	Serving bool
}

// ServingProbeTimeout bounds the probe of a VM that serves beside other
// replicas (Sight.Serving). A probe in flight when its VM dies waits out
// its timeout, since a dead VM never refuses, and only then is the VM
// asked for again: with the prober's own 5 s, a dead VM stayed 5.3 s in
// the Service in `make e2e` while the serving watch had found it within a
// second (docs/addresses.md, "Failover"). A live VM answers its probe on
// the backend's network in milliseconds, and three failures in a row
// still decide that one is unreachable.
const ServingProbeTimeout = time.Second

// Check is the operation that looks at a recorded instance: Get, then
// Look, with the probe of a serving VM bounded by ServingProbeTimeout. A
// serving VM that did not answer within it is asked for again: one that
// died while the probe ran (a Get just before the death said Running) is
// then found down in this operation, and its reconcile takes it out of
// the Service at once instead of counting one failed probe of three; the
// next operation deletes it (Sight.Serving). Only a NotFound from the
// second Get is an answer; another error leaves the failed probe to count.
func Check(ctx context.Context, prov contract.Provider, providerID string, how Sight) (Observed, error) {
	inst, err := prov.Get(ctx, providerID)
	if err != nil {
		return Observed{}, err
	}
	seen := Look(ctx, prov, inst, how)
	if seen.Probed == nil || !how.Serving {
		return seen, nil
	}
	again, err := prov.Get(ctx, providerID)
	if errors.Is(err, contract.ErrNotFound) {
		return Observed{}, err
	}
	if err == nil && again.State != contract.StateRunning {
		return Look(ctx, prov, again, how), nil
	}
	// Running still, or not known: the failed probe counts.
	return seen, nil
}

// Look ends an operation that found inst: a running instance is probed
// (the probe reaches only the VM, within its own timeout), and a stopped
// or terminated one deleted, to be created again, unless it serves
// (Sight.Serving). Delete is idempotent (contract §4.9): on an instance
// whose deletion is under way it returns nil, and it finishes one a
// cut-off Delete left, which on vSphere reads Terminated until a Delete
// completes it (its deleting mark, for up to taskTimeout+callTimeout).
func Look(ctx context.Context, prov contract.Provider, inst contract.Instance, how Sight) Observed {
	seen := Observed{Inst: inst}
	if !CarriesUID(inst, how.UID) {
		return seen
	}
	switch inst.State {
	case contract.StateRunning:
		pctx := ctx
		if how.Serving {
			var cancel context.CancelFunc
			pctx, cancel = context.WithTimeout(ctx, ServingProbeTimeout)
			defer cancel()
		}
		seen.Stats, seen.Probed = how.Prober.Probe(pctx, inst.IP, how.Port, how.Stats)
	case contract.StateStopped, contract.StateTerminated:
		if !how.Serving {
			seen.Deleted, seen.DeleteErr = true, prov.Delete(ctx, inst.ProviderID)
		}
	}
	return seen
}
