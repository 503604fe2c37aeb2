package openstack

import (
	"context"

	"github.com/go-logr/logr"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servergroups"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Server groups (regions[].serverGroupPolicy): one Nova server group per
// Proxy, so that the servers of one Proxy (replicas, later) land on
// different hosts; servers of different Proxies need not. Create makes it
// (named by the Proxy's UID, found again by that name: Nova's server
// groups carry no tags or metadata), passes it as the scheduler hint
// "group" and records its ID in the server's metadata; Delete reads the
// ID there and, with the Proxy's last server in the region, deletes the
// group before the server (Nova deletes a group whatever its members:
// nova/api/openstack/compute/server_groups.py, delete; so the other
// replicas keep it), so a Delete cut at any step resumes on the next one. A Create
// that Nova refuses deletes the group it made (contract §4.10). Nova's
// default quota is 10 server groups per project (nova/conf/quota.py,
// server_groups): the guide says to raise it with the number of Proxies.
//
// The group is created with "policies": [policy], which microversion 2.52
// (the provider's) takes; 2.64 renamed it "policy" (schemas/server_groups.py).

// metaServerGroup is the server's metadata key holding its group's ID
// (Nova's metadata keys match ^[a-zA-Z0-9-_:. ]{1,255}$).
const metaServerGroup = "egressproxies.io:server-group"

// serverGroupName is the Proxy's group's name.
func serverGroupName(uid string) string { return tagUIDPrefix + uid }

// ensureServerGroup finds or makes the Proxy's server group and returns
// its ID; "" when the region places servers without one.
func (p *Provider) ensureServerGroup(ctx context.Context, pl plan, req contract.CreateRequest) (string, error) {
	if pl.region.ServerGroupPolicy == "" {
		return "", nil
	}
	name := serverGroupName(req.UID)
	var id string
	// Nova lists groups a page of [api]max_limit at a time, from an
	// offset, with no link to the next page (nova/api/openstack/common.py
	// limited): read pages until an empty one.
	err := p.do(ctx, "ListServerGroups", pl.regionKey, func(ctx context.Context, c *clients) error {
		for offset := 0; id == ""; {
			pages, err := servergroups.List(c.compute, servergroups.ListOpts{Offset: offset}).AllPages(ctx)
			if err != nil {
				return err
			}
			page, err := servergroups.ExtractServerGroups(pages)
			if err != nil || len(page) == 0 {
				return err
			}
			for _, g := range page {
				if g.Name == name {
					id = g.ID
					break
				}
			}
			offset += len(page)
		}
		return nil
	})
	if err != nil || id != "" {
		return id, err
	}
	err = p.do(ctx, "CreateServerGroup", pl.regionKey, func(ctx context.Context, c *clients) error {
		g, err := servergroups.Create(ctx, c.compute, servergroups.CreateOpts{Name: name, Policies: []string{pl.region.ServerGroupPolicy}}).Extract()
		if err == nil {
			id = g.ID
		}
		return err
	})
	if err == nil {
		logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("created server group", "serverGroup", id, "policy", pl.region.ServerGroupPolicy)
	}
	return id, err
}

// deleteServerGroup deletes a server group; one already gone is success.
func (p *Provider) deleteServerGroup(ctx context.Context, regionKey, id string) error {
	err := p.do(ctx, "DeleteServerGroup", regionKey, func(ctx context.Context, c *clients) error {
		return servergroups.Delete(ctx, c.compute, id).ExtractErr()
	})
	if isStatus(err, 404) || contract.ClassOf(err) == contract.ClassNotFound {
		return nil
	}
	if err == nil {
		logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("deleted server group", "serverGroup", id)
	}
	return err
}

// deleteServerGroupOf deletes the group the server's metadata names, if
// any, before the server itself is deleted, when the server is the last
// of its Proxy in the region: the replicas share the group, and Nova
// deletes a group whatever its members, so deleting it with one replica
// (a scale-down, a replacement) would leave the others and the next one
// without their anti-affinity. A replica whose delete is under way (or
// done, SOFT_DELETED) does not hold the group; the operator deletes a
// Proxy's servers one after the other, so the last Delete sees the
// others going and takes the group. A server already gone names none (a
// GC blind spot the spec lists).
func (p *Provider) deleteServerGroupOf(ctx context.Context, regionKey string, s servers.Server) error {
	id := s.Metadata[metaServerGroup]
	if id == "" {
		return nil
	}
	replicas, err := p.listTagged(ctx, regionKey, tagManaged+","+tagUIDPrefix+uidOf(s))
	if err != nil {
		return err
	}
	for _, r := range replicas {
		if state, _, _ := stateOf(r); r.ID != s.ID && state != contract.StateTerminated && r.Metadata[metaServerGroup] == id {
			logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("kept the server group: another replica is in it", "serverGroup", id, "replica", r.ID)
			return nil
		}
	}
	return p.deleteServerGroup(ctx, regionKey, id)
}

// deleteServerGroupAfterFault deletes the group of a failed server the
// provider itself just deleted, unless another replica is in it: Delete
// finds a group through its server, and this server is going. The next
// Create makes a fresh group, or finds the one kept. A failure is logged;
// the group is then a GC blind spot (spec entry 24).
func (p *Provider) deleteServerGroupAfterFault(ctx context.Context, regionKey string, s servers.Server) {
	id := s.Metadata[metaServerGroup]
	if id == "" {
		return
	}
	if err := p.deleteServerGroupOf(ctx, regionKey, s); err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "could not delete the server group of a failed server", "serverGroup", id)
	}
}
