package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metrics"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// GarbageCollector deletes instances that nothing owns (DESIGN.md §4): per
// provider, every gc.interval, it lists the instances carrying
// LabelManaged and deletes each that is older than gc.minAge and is
// neither its Proxy's current instance nor its pending replacement, or
// whose Proxy is gone. It runs on the leader only.
type GarbageCollector struct {
	// Reader reads Proxies straight from the API server, not a cache that
	// may lag the status write that records a new instance.
	Reader    client.Reader
	Providers *providers.Set
	Recorder  recorder.EventRecorder
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Start sweeps each provider every gc.interval until ctx ends.
func (g *GarbageCollector) Start(ctx context.Context) error {
	everyProvider(ctx, g.Providers, func(e *providers.Entry) time.Duration { return e.GC.Interval },
		func(ctx context.Context, e *providers.Entry) {
			if _, err := g.Sweep(ctx, e); err != nil && ctx.Err() == nil {
				logf.FromContext(ctx).Error(err, "garbage collection sweep failed", contract.LogKeyProvider, e.Name)
			}
		})
	return nil
}

// NeedLeaderElection keeps sweeps to one replica.
func (g *GarbageCollector) NeedLeaderElection() bool { return true }

// Sweep runs one sweep over one provider and returns the instances it
// deleted. A partial list (list-partial: omit-unreachable) is swept for
// what it holds: an unread location is never taken for an empty one.
func (g *GarbageCollector) Sweep(ctx context.Context, e *providers.Entry) ([]contract.Instance, error) {
	log := logf.FromContext(ctx).WithValues(contract.LogKeyProvider, e.Name)
	ctx = logf.IntoContext(ctx, log)
	found, listErr := e.Provider.ListByTag(ctx, contract.LabelManaged, e.Owner)
	if listErr != nil && !errors.Is(listErr, contract.ErrPartialList) {
		return nil, fmt.Errorf("list managed instances: %w", listErr)
	}
	var proxies v1alpha1.ProxyList
	if err := g.Reader.List(ctx, &proxies); err != nil {
		return nil, fmt.Errorf("list proxies: %w", err)
	}
	byUID := map[string]*v1alpha1.Proxy{}
	for i := range proxies.Items {
		byUID[string(proxies.Items[i].UID)] = &proxies.Items[i]
	}
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	var deleted []contract.Instance
	for _, inst := range found {
		owner := byUID[inst.UID]
		reason := whyCollect(inst, owner, e.Name)
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
		metrics.GCDeletions.WithLabelValues(e.Name, reason).Inc()
		log.Info("garbage-collected instance", contract.LogKeyInstance, inst.Name, "providerID", inst.ProviderID, "reason", reason, "age", now().Sub(inst.CreatedAt).Round(time.Second))
		if owner != nil && g.Recorder != nil {
			g.Recorder.Eventf(owner, nil, corev1.EventTypeNormal, "GarbageCollected", "Delete",
				"deleted instance %s (%s): neither the current instance nor its replacement", inst.Name, inst.ProviderID)
		}
		deleted = append(deleted, inst)
	}
	return deleted, listErr
}

// whyCollect says why inst should go, or "" when its Proxy wants it.
func whyCollect(inst contract.Instance, owner *v1alpha1.Proxy, provider string) string {
	switch {
	case owner == nil:
		return "orphan"
	case owner.Spec.Provider != provider:
		return "wrong-provider"
	case wants(owner.Status.Instance, inst) || wants(owner.Status.Replacement, inst):
		return ""
	default:
		return "superseded"
	}
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
