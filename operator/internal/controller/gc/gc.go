// Package gc deletes the VMs and releases the addresses (the cluster's and
// the egress addresses a provider keeps) no Proxy wants
// (docs/operator.md, "Garbage collection").
package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metrics"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// Collector deletes instances that nothing owns (docs/architecture.md, Principles):
// per provider entry, every gc.interval, it lists the instances this
// install and entry made (marked with the entry's Owner) and deletes each
// that is older than gc.minAge and is neither its Proxy's current instance
// nor its pending replacement, or whose Proxy is gone. Instances with the
// marks of v0.1, which name no owner, are deleted only when their Proxy is
// in this cluster, on this entry, and no longer wants them. It runs on the
// leader only.
type Collector struct {
	// Reader reads Proxies straight from the API server, not a cache that
	// may lag the status write that records a new instance.
	Reader    client.Reader
	Providers *providers.Set
	Recorder  recorder.EventRecorder
	// Addresses deletes the ProxyAddresses of Proxies that are gone and
	// hold no VM (read through Reader); nil: addresses are not collected.
	Addresses client.Writer
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// The passes of a sweep, as the metric's pass label and the logs name them.
const (
	// PassOwned sweeps the instances marked with the entry's Owner.
	PassOwned = "owned"
	// PassLegacy sweeps the instances marked LegacyManagedValue: made by
	// some install before marks named one, maybe another cluster's.
	PassLegacy = "legacy"
)

// Start sweeps each provider every gc.interval until ctx ends.
func (g *Collector) Start(ctx context.Context) error {
	g.Providers.Every(ctx, func(e *providers.Entry) time.Duration { return e.GC.Interval },
		func(ctx context.Context, e *providers.Entry) {
			if _, err := g.Sweep(ctx, e); err != nil && ctx.Err() == nil {
				logf.FromContext(ctx).Error(err, "garbage collection sweep failed", contract.LogKeyProvider, e.Name)
			}
		})
	return nil
}

// NeedLeaderElection keeps sweeps to one replica.
func (g *Collector) NeedLeaderElection() bool { return true }

// Sweep runs one sweep over one provider entry and returns the instances
// it deleted: the owned pass, then the legacy pass, each over its own
// list. A list that fails skips its pass only; a partial list
// (list-partial: omit-unreachable) is swept for what it holds: an unread
// location is never taken for an empty one.
func (g *Collector) Sweep(ctx context.Context, e *providers.Entry) (deleted []contract.Instance, err error) {
	defer func() {
		if err != nil {
			metrics.GCSweepFailures.WithLabelValues(e.Name).Inc()
		} else {
			metrics.GCLastSuccess.WithLabelValues(e.Name).SetToCurrentTime()
		}
	}()
	log := logf.FromContext(ctx).WithValues(contract.LogKeyProvider, e.Name)
	ctx = logf.IntoContext(ctx, log)
	if e.Owner == "" {
		// An empty mark value would select the unmarked instances on some
		// backends: never sweep without knowing whose instances to list.
		return nil, fmt.Errorf("provider entry %q has no owner", e.Name)
	}
	owned, ownedErr := listMarked(ctx, e, e.Owner)
	legacy, legacyErr := listMarked(ctx, e, contract.LegacyManagedValue)
	if !usable(ownedErr) && !usable(legacyErr) {
		return nil, errors.Join(ownedErr, legacyErr)
	}
	// Addresses, and kept egress addresses, are listed before the
	// Proxies: each is made for a Proxy that exists, so one listed here
	// whose Proxy the later list lacks belongs to a Proxy that is gone.
	addrs, addrErr := g.listAddresses(ctx)
	kept, egressErr := listEgress(ctx, e)
	// Proxies are listed after the instances: an instance made after this
	// list is younger than gc.minAge, so it is spared whatever it says.
	var proxies v1alpha1.ProxyList
	if err := g.Reader.List(ctx, &proxies); err != nil {
		return nil, fmt.Errorf("list proxies: %w", err)
	}
	byUID := map[string]*v1alpha1.Proxy{}
	for i := range proxies.Items {
		byUID[string(proxies.Items[i].UID)] = &proxies.Items[i]
	}
	deleted = g.collect(ctx, e, PassOwned, e.Owner, owned, byUID, whyCollect)
	deleted = append(deleted, g.collect(ctx, e, PassLegacy, contract.LegacyManagedValue, legacy, byUID, whyCollectLegacy)...)
	if ownedErr == nil && legacyErr == nil && addrErr == nil {
		// Only complete lists prove that no VM holds an address.
		g.releaseOrphanAddresses(ctx, e, addrs, byUID, append(owned, legacy...))
	}
	if ownedErr == nil && legacyErr == nil && egressErr == nil {
		g.releaseOrphanEgress(ctx, e, kept, byUID, append(owned, legacy...))
	}
	return deleted, errors.Join(ownedErr, legacyErr, addrErr, egressErr)
}

// listMarked lists e's instances whose managed mark is value.
func listMarked(ctx context.Context, e *providers.Entry, value string) ([]contract.Instance, error) {
	found, err := e.Provider.ListByTag(ctx, contract.LabelManaged, value)
	if err != nil && !errors.Is(err, contract.ErrPartialList) {
		return nil, fmt.Errorf("list instances marked %s=%s: %w", contract.LabelManaged, value, err)
	}
	return found, err
}

// usable reports whether a list that returned err holds what it read.
func usable(err error) bool { return err == nil || errors.Is(err, contract.ErrPartialList) }

// collect deletes the instances of one pass that why says should go.
func (g *Collector) collect(ctx context.Context, e *providers.Entry, pass, mark string, found []contract.Instance,
	byUID map[string]*v1alpha1.Proxy, why func(contract.Instance, *v1alpha1.Proxy, string) string) []contract.Instance {
	log := logf.FromContext(ctx).WithValues("pass", pass)
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	var deleted []contract.Instance
	for _, inst := range found {
		if inst.Owner != "" && inst.Owner != mark {
			// The provider's filter is not exact: whoever marked this
			// instance, it is not this pass's to judge.
			log.Info("the provider listed an instance with another managed mark; leaving it alone", contract.LogKeyInstance, inst.Name, "owner", inst.Owner, "listed", mark)
			continue
		}
		owner := byUID[inst.UID]
		reason := why(inst, owner, e.Name)
		switch {
		case reason == "", inst.State == contract.StateTerminated:
			continue
		case inst.CreatedAt.IsZero() || now().Sub(inst.CreatedAt) < e.GC.MinAge:
			log.V(1).Info("sparing a young instance", contract.LogKeyInstance, inst.Name, "reason", reason, "createdAt", inst.CreatedAt)
			continue
		}
		if err := e.Provider.Delete(ctx, inst.ProviderID); err != nil {
			log.Error(err, "garbage collection delete failed", contract.LogKeyInstance, inst.Name, "providerID", inst.ProviderID)
			continue
		}
		metrics.GCDeletions.WithLabelValues(e.Name, reason, pass).Inc()
		log.Info("garbage-collected instance", contract.LogKeyInstance, inst.Name, "providerID", inst.ProviderID, "reason", reason, "age", now().Sub(inst.CreatedAt).Round(time.Second))
		if owner != nil && g.Recorder != nil {
			g.Recorder.Eventf(owner, nil, corev1.EventTypeNormal, "GarbageCollected", "Delete",
				"deleted instance %s (%s): neither the current instance nor its replacement (%s pass, marks %s=%s)", inst.Name, inst.ProviderID, pass, contract.LabelManaged, mark)
		}
		deleted = append(deleted, inst)
	}
	return deleted
}

// whyCollect says why an instance of this install and entry should go, or
// "" when its Proxy wants it.
func whyCollect(inst contract.Instance, owner *v1alpha1.Proxy, provider string) string {
	switch {
	case owner == nil:
		return "orphan"
	case owner.Spec.Provider != provider:
		return "wrong-provider"
	case slices.ContainsFunc(replica.All(owner), func(ref *v1alpha1.InstanceRef) bool { return wants(ref, inst) }):
		// A replica's instance or replacement: a removed replica's entry
		// is dropped only once its VMs are gone.
		return ""
	default:
		return "superseded"
	}
}

// whyCollectLegacy says why an instance with v0.1's marks should go: only
// when its Proxy is in this cluster, names this entry and does not want
// it. A legacy instance of no Proxy here may be another install's (the
// marks never said), so it is never an orphan, nor of a wrong provider.
func whyCollectLegacy(inst contract.Instance, owner *v1alpha1.Proxy, provider string) string {
	if owner == nil || owner.Spec.Provider != provider {
		return ""
	}
	return whyCollect(inst, owner, provider)
}

// wants reports whether ref is inst: by providerID, or by name while the
// providerID is not yet recorded (the Create is in flight).
func wants(ref *v1alpha1.InstanceRef, inst contract.Instance) bool {
	if ref == nil {
		return false
	}
	if ref.ProviderID != "" {
		return ref.ProviderID == inst.ProviderID
	}
	return ref.Name == inst.Name
}
