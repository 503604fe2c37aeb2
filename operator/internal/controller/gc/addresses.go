package gc

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// A ProxyAddress is cluster-scoped and its Proxy namespaced, so it cannot
// carry an owner reference, and Kubernetes' own garbage collector never
// deletes it. A Proxy whose finalizer a person removed leaves its
// addresses behind; the sweep releases each once its Proxy is gone and no
// instance of the entry carries that Proxy's UID.

// listAddresses lists every ProxyAddress; none when addresses are not
// collected.
func (g *Collector) listAddresses(ctx context.Context) ([]v1alpha1.ProxyAddress, error) {
	if g.Addresses == nil {
		return nil, nil
	}
	var list v1alpha1.ProxyAddressList
	if err := g.Reader.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list proxyaddresses: %w", err)
	}
	return list.Items, nil
}

// releaseOrphanAddresses deletes the entry's ProxyAddresses whose Proxy is
// not in byUID and whose Proxy's UID no listed instance carries, in any
// state: a VM being deleted still holds its address.
func (g *Collector) releaseOrphanAddresses(ctx context.Context, e *providers.Entry, addrs []v1alpha1.ProxyAddress,
	byUID map[string]*v1alpha1.Proxy, instances []contract.Instance) {
	log := logf.FromContext(ctx)
	holding := uidsOf(instances)
	for i := range addrs {
		pa := &addrs[i]
		uid := pa.Spec.Proxy.UID
		if pa.Spec.Provider != e.Name || byUID[uid] != nil || holding[uid] {
			continue
		}
		paUID := pa.UID
		err := g.Addresses.Delete(ctx, pa, client.Preconditions{UID: &paUID})
		if err != nil && !apierrors.IsNotFound(err) {
			log.Error(err, "releasing an orphaned address failed", "proxyAddress", pa.Name)
			continue
		}
		log.Info("released the address of a Proxy that is gone", "proxyAddress", pa.Name, "address", pa.Spec.Address,
			"proxy", pa.Spec.Proxy.Namespace+"/"+pa.Spec.Proxy.Name, "uid", uid)
	}
}

// uidsOf is the set of Proxy UIDs the instances carry.
func uidsOf(instances []contract.Instance) map[string]bool {
	out := map[string]bool{}
	for _, inst := range instances {
		out[inst.UID] = true
	}
	return out
}
