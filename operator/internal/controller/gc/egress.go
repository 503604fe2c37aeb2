package gc

import (
	"context"
	"fmt"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// An egress address a provider keeps per replica (contract §3.1) outlives
// the replica's VMs: the Proxy's finalizer and its scale-down release it.
// A Proxy whose finalizer a person removed, a crash between a VM's last
// Delete and the release, or a Proxy moved to another entry leaves it
// behind; the sweep releases each once its Proxy is not on the entry and
// no instance of the entry carries that Proxy's UID.

// listEgress lists the egress addresses the entry keeps for its owner;
// none when its provider keeps none.
func listEgress(ctx context.Context, e *providers.Entry) ([]contract.Egress, error) {
	keeper := providers.Keeper(e.Provider)
	if keeper == nil {
		return nil, nil
	}
	kept, err := keeper.ListEgress(ctx, e.Owner)
	if err != nil {
		return nil, fmt.Errorf("list egress addresses of %s: %w", e.Owner, err)
	}
	return kept, nil
}

// releaseOrphanEgress releases the kept addresses whose Proxy is not in
// byUID on this entry and whose Proxy's UID no listed instance carries,
// in any state: a VM being deleted may still use its address.
func (g *Collector) releaseOrphanEgress(ctx context.Context, e *providers.Entry, kept []contract.Egress,
	byUID map[string]*v1alpha1.Proxy, instances []contract.Instance) {
	log := logf.FromContext(ctx)
	holding := uidsOf(instances)
	keeper := providers.Keeper(e.Provider)
	for _, k := range kept {
		if p := byUID[k.UID]; (p != nil && p.Spec.Provider == e.Name) || holding[k.UID] {
			continue
		}
		if err := keeper.ReleaseEgress(ctx, k); err != nil {
			log.Error(err, "releasing an orphaned egress address failed", "address", k.IP, "uid", k.UID, "replica", k.Replica)
			continue
		}
		log.Info("released the egress address of a Proxy that is gone", "address", k.IP, "uid", k.UID, "replica", k.Replica, "region", k.Region)
	}
}
