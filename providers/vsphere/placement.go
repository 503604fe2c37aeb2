package vsphere

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// hostFor returns the host a clone into the plan's zone names (spec entry
// 3): the zone's own when it has one; on a cluster without DRS, one the
// provider picks; otherwise nil, and DRS (or the pool's standalone host)
// places the VM. vCenter refuses, with InvalidArgument on
// spec.location.host, a clone into a cluster without DRS that names no
// host (API reference, VirtualMachineRelocateSpec.pool), though the same
// page says a clone gets "a random compatible host": the provider names
// one whenever DRS is off, which is right under either reading.
func (p *Provider) hostFor(ctx context.Context, c *vim25.Client, plan plan, pool *object.ResourcePool) (*types.ManagedObjectReference, error) {
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
	return pickHost(cluster.Name, hosts)
}

// poolCluster reads, in one RetrieveProperties, the cluster that owns the
// pool (nil for a standalone host's pool) with its DRS configuration, and
// the state and VMs of each of its hosts.
func poolCluster(ctx context.Context, c *vim25.Client, pool *object.ResourcePool) (*mo.ClusterComputeResource, []mo.HostSystem, error) {
	owner := &types.TraversalSpec{Type: "ResourcePool", Path: "owner", SelectSet: []types.BaseSelectionSpec{
		&types.TraversalSpec{Type: "ClusterComputeResource", Path: "host"},
	}}
	res, err := property.DefaultCollector(c).RetrieveProperties(ctx, types.RetrieveProperties{SpecSet: []types.PropertyFilterSpec{{
		ObjectSet: []types.ObjectSpec{{Obj: pool.Reference(), Skip: types.NewBool(true), SelectSet: []types.BaseSelectionSpec{owner}}},
		PropSet: []types.PropertySpec{
			{Type: "ClusterComputeResource", PathSet: []string{"name", "configurationEx"}},
			{Type: "HostSystem", PathSet: []string{"name", "runtime.connectionState", "runtime.inMaintenanceMode", "vm"}},
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

// pickHost picks, among the cluster's hosts that are connected and out of
// maintenance mode, the one with the fewest VMs (ties: by name): without
// DRS nothing else spreads the proxies, and a host the admin is draining
// must not get new ones. None is a transient error: hosts come back.
func pickHost(cluster string, hosts []mo.HostSystem) (*types.ManagedObjectReference, error) {
	hosts = slices.DeleteFunc(hosts, func(h mo.HostSystem) bool {
		return h.Runtime.ConnectionState != types.HostSystemConnectionStateConnected || h.Runtime.InMaintenanceMode
	})
	if len(hosts) == 0 {
		return nil, fmt.Errorf("cluster %s has DRS off and no host that is connected and out of maintenance mode to place the VM on", cluster)
	}
	best := slices.MinFunc(hosts, func(a, b mo.HostSystem) int {
		return cmp.Or(cmp.Compare(len(a.Vm), len(b.Vm)), cmp.Compare(a.Name, b.Name))
	})
	r := best.Reference()
	return &r, nil
}
