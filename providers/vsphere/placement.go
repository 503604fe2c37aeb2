package vsphere

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// hostFor returns the host a clone into the plan's zone names (spec entry
// 3): the zone's own when it has one; on a cluster without DRS, one the
// provider picks among those that see what the clone needs (sees);
// otherwise nil, and DRS (or the pool's standalone host) places the VM.
// vCenter refuses, with InvalidArgument on spec.location.host, a clone
// into a cluster without DRS that names no host (API reference,
// VirtualMachineRelocateSpec.pool), though the same page says a clone gets
// "a random compatible host": the provider names one whenever DRS is off,
// which is right under either reading.
func (p *Provider) hostFor(ctx context.Context, c *vim25.Client, plan plan, pool *object.ResourcePool, sees hostNeeds) (*types.ManagedObjectReference, error) {
	if plan.zone.Host != "" {
		host, err := ref(ctx, p, c, plan.regionName, plan.field("host"), plan.zone.Host, (*find.Finder).HostSystem)
		if err != nil {
			return nil, err
		}
		r := host.Reference()
		return &r, nil
	}
	cluster, hosts, err := poolCluster(ctx, c, pool)
	if err != nil || cluster == nil {
		return nil, err
	}
	if cfg, ok := cluster.ConfigurationEx.(*types.ClusterConfigInfoEx); ok && cfg.DrsConfig.Enabled != nil && *cfg.DrsConfig.Enabled {
		return nil, nil
	}
	need := sees.refs()
	if sees.template != nil {
		// A linked clone's disks are children of the template's: its host
		// must see the template's datastores too.
		var vm mo.VirtualMachine
		if err := sees.template.Properties(ctx, sees.template.Reference(), []string{"datastore"}, &vm); err != nil {
			return nil, err
		}
		for _, ds := range vm.Datastore {
			need = append(need, named{ds, "the template's datastore " + ds.Value})
		}
	}
	return pickHost(strings.TrimSuffix(plan.field(""), "."), cluster.Name, hosts, need)
}

// hostNeeds is what the host of a clone must see: the clone's datastore,
// the network of its card, and, for a linked clone, the template's
// datastores. A nil field needs nothing.
type hostNeeds struct {
	datastore, network *named
	template           *object.VirtualMachine
}

// named is a managed object and how the config (or the provider) named it.
type named struct {
	ref  types.ManagedObjectReference
	name string
}

func (n hostNeeds) refs() []named {
	var out []named
	for _, x := range []*named{n.datastore, n.network} {
		if x != nil {
			out = append(out, *x)
		}
	}
	return out
}

// poolCluster reads, in one RetrieveProperties, the cluster that owns the
// pool (nil for a standalone host's pool) with its DRS configuration, and
// the state, VMs, datastores and networks of each of its hosts.
func poolCluster(ctx context.Context, c *vim25.Client, pool *object.ResourcePool) (*mo.ClusterComputeResource, []mo.HostSystem, error) {
	owner := &types.TraversalSpec{Type: "ResourcePool", Path: "owner", SelectSet: []types.BaseSelectionSpec{
		&types.TraversalSpec{Type: "ClusterComputeResource", Path: "host"},
	}}
	res, err := property.DefaultCollector(c).RetrieveProperties(ctx, types.RetrieveProperties{SpecSet: []types.PropertyFilterSpec{{
		ObjectSet: []types.ObjectSpec{{Obj: pool.Reference(), Skip: types.NewBool(true), SelectSet: []types.BaseSelectionSpec{owner}}},
		PropSet: []types.PropertySpec{
			{Type: "ClusterComputeResource", PathSet: []string{"name", "configurationEx"}},
			{Type: "HostSystem", PathSet: []string{"name", "runtime.connectionState", "runtime.inMaintenanceMode", "vm", "datastore", "network"}},
		},
	}}})
	if err != nil {
		return nil, nil, err
	}
	var cluster *mo.ClusterComputeResource
	var hosts []mo.HostSystem
	for _, oc := range res.Returnval {
		switch oc.Obj.Type {
		case "ClusterComputeResource":
			cluster = new(mo.ClusterComputeResource)
			if err := mo.LoadObjectContent([]types.ObjectContent{oc}, cluster); err != nil {
				return nil, nil, err
			}
		case "HostSystem":
			var h mo.HostSystem
			if err := mo.LoadObjectContent([]types.ObjectContent{oc}, &h); err != nil {
				return nil, nil, err
			}
			hosts = append(hosts, h)
		}
	}
	return cluster, hosts, nil
}

// pickHost picks, among the cluster's hosts that are connected, out of
// maintenance mode and see everything in need, the one with the fewest
// VMs (ties: by name): without DRS nothing else spreads the proxies, and
// a host the admin is draining must not get new ones. No host up is a
// transient error: hosts come back. Hosts up but none that sees what the
// clone needs (a local datastore, a standard vSwitch's port group, common
// on clusters without DRS) is Permanent, naming the zone (zone) and what
// no host sees: the next try would pick the same way, and only an
// administrator can change it.
func pickHost(zone, cluster string, hosts []mo.HostSystem, need []named) (*types.ManagedObjectReference, error) {
	hosts = slices.DeleteFunc(hosts, func(h mo.HostSystem) bool {
		return h.Runtime.ConnectionState != types.HostSystemConnectionStateConnected || h.Runtime.InMaintenanceMode
	})
	if len(hosts) == 0 {
		return nil, fmt.Errorf("cluster %s has DRS off and no host that is connected and out of maintenance mode to place the VM on", cluster)
	}
	up := len(hosts)
	var unseen []string
	hosts = slices.DeleteFunc(hosts, func(h mo.HostSystem) bool {
		for _, n := range need {
			if !slices.Contains(h.Datastore, n.ref) && !slices.Contains(h.Network, n.ref) {
				if !slices.Contains(unseen, n.name) {
					unseen = append(unseen, n.name)
				}
				return true
			}
		}
		return false
	})
	if len(hosts) == 0 {
		return nil, contract.Permanentf("%s: cluster %s has DRS off, and none of its %d hosts that are up sees all of %v (missing on some: %v): give the zone a datastore and network its hosts share, or a host that sees them", zone, cluster, up, names(need), unseen)
	}
	best := slices.MinFunc(hosts, func(a, b mo.HostSystem) int {
		return cmp.Or(cmp.Compare(len(a.Vm), len(b.Vm)), cmp.Compare(a.Name, b.Name))
	})
	r := best.Reference()
	return &r, nil
}

func names(need []named) []string {
	out := make([]string, len(need))
	for i, n := range need {
		out[i] = n.name
	}
	return out
}
