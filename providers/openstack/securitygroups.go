package openstack

import (
	"cmp"
	"context"
	"net/netip"
	"slices"

	"github.com/go-logr/logr"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/attributestags"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/rules"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// The managed security group (regions[].managedSecurityGroup): one per
// region, not one per Proxy or per Owner. Neutron's default quota is 10
// groups per project (neutron/conf/quota.py, DEFAULT_QUOTA_SG), so a
// group per Proxy would stop the eleventh Proxy, and a group per Owner
// grows with every install and entry that ever used the project: the
// harness, whose rules each use an Owner of their own, filled the real
// cloud's quota so (409 OverQuota). Cluster API Provider OpenStack
// likewise manages groups per cluster, not per machine. The group holds
// one ingress rule per (port, allowed client network); Create adds the
// rules its request's Port needs. It is made once and shared by every
// server the provider makes in the region, whatever its Owner, like an
// image: not a secondary resource of an instance (contract §4.10); Delete
// leaves it, and the guide says how to remove it. A rule of a port no
// Proxy uses any more stays; it opens a port nothing listens on.

// managedGroupDescription marks a group this provider made. Neutron (Zed)
// takes no tags in a security group's create body
// (neutron/extensions/tagging.py: tags are set by PUT .../tags after), so
// a Create cut between the two leaves a group with the name and this
// description but no tags, which the next Create tags and uses.
const managedGroupDescription = "egress-proxies-operator: opens proxy ports to the allowed client networks"

// managedGroupName is the region's group's name, and its tags mark it
// (tagManaged) and say what it is (managedGroupName itself).
const managedGroupName = "egressproxies-proxy-ports"

// ensureSecurityGroup finds or makes the region's group, adds the ingress
// rules req.Port needs and returns the group's ID; "" when the region
// does not manage security groups.
func (p *Provider) ensureSecurityGroup(ctx context.Context, pl plan, req contract.CreateRequest) (string, error) {
	m := pl.region.ManagedSecurityGroup
	if m == nil {
		return "", nil
	}
	// One Create at a time per group: two Proxies' Creates racing would
	// each make a group.
	done, err := p.creating.lock(ctx, "security-group/"+pl.regionKey)
	if err != nil {
		return "", err
	}
	defer done()
	name, tags := managedGroupName, []string{tagManaged, managedGroupName}
	var g *groups.SecGroup
	err = p.do(ctx, "ListSecurityGroups", pl.regionKey, func(ctx context.Context, c *clients) error {
		if c.network == nil {
			return contract.Permanentf("region %q has no %s network endpoint in the catalogue; managedSecurityGroup needs Neutron", pl.region.Name, p.cfg.Interface)
		}
		// The token's project's only: an admin token sees every
		// project's groups, and another install's managed group in
		// another project is not this region's.
		pages, err := groups.List(c.network, groups.ListOpts{Name: name, ProjectID: p.project()}).AllPages(ctx)
		if err != nil {
			return err
		}
		all, err := groups.ExtractGroups(pages)
		g = pickManagedGroup(all, name, tags)
		return err
	})
	if err != nil {
		return "", err
	}
	log := logr.FromContextOrDiscard(ctx)
	if g == nil {
		err = p.do(ctx, "CreateSecurityGroup", pl.regionKey, func(ctx context.Context, c *clients) (err error) {
			g, err = groups.Create(ctx, c.network, groups.CreateOpts{Name: name, Description: managedGroupDescription}).Extract()
			return err
		})
		if err != nil {
			return "", err
		}
		log.V(contract.LogOutcome).Info("created security group", "securityGroup", g.ID, "name", name)
	}
	if !containsAll(g.Tags, tags) {
		err = p.do(ctx, "TagSecurityGroup", pl.regionKey, func(ctx context.Context, c *clients) error {
			_, err := attributestags.ReplaceAll(ctx, c.network, "security-groups", g.ID, attributestags.ReplaceAllOpts{Tags: tags}).Extract()
			return err
		})
		if err != nil {
			return "", err
		}
	}
	for _, cidr := range m.AllowedClients {
		if hasIngressRule(g.Rules, int(req.Port), cidr) {
			continue
		}
		opts := ingressRule(g.ID, int(req.Port), cidr)
		err = p.do(ctx, "CreateSecurityGroupRule", pl.regionKey, func(ctx context.Context, c *clients) error {
			_, err := rules.Create(ctx, c.network, opts).Extract()
			// 409 SecurityGroupRuleExists: an earlier attempt made it
			// (neutron/db/securitygroups_db.py, _check_for_duplicate_rules).
			if isStatus(err, 409) {
				return nil
			}
			return err
		})
		if err != nil {
			return "", err
		}
		log.V(contract.LogStep).Info("opened the proxy port", "securityGroup", g.ID, "port", req.Port, "clients", cidr)
	}
	return g.ID, nil
}

// pickManagedGroup is the oldest group of the name carrying the marks,
// else one with the name and the provider's description and no tags (a
// create cut before its tags), else nil. A group of the name made by
// someone else is never used.
func pickManagedGroup(all []groups.SecGroup, name string, tags []string) *groups.SecGroup {
	slices.SortFunc(all, func(a, b groups.SecGroup) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	var untagged *groups.SecGroup
	for i, g := range all {
		switch {
		case g.Name != name:
		case containsAll(g.Tags, tags):
			return &all[i]
		case len(g.Tags) == 0 && g.Description == managedGroupDescription && untagged == nil:
			untagged = &all[i]
		}
	}
	return untagged
}

func ingressRule(groupID string, port int, cidr string) rules.CreateOpts {
	et := rules.EtherType4
	if netip.MustParsePrefix(cidr).Addr().Is6() {
		et = rules.EtherType6
	}
	return rules.CreateOpts{
		Direction: rules.DirIngress, EtherType: et, SecGroupID: groupID, Protocol: rules.ProtocolTCP,
		PortRangeMin: port, PortRangeMax: port, RemoteIPPrefix: cidr, Description: "egress-proxies-operator proxy port",
	}
}

func hasIngressRule(have []rules.SecGroupRule, port int, cidr string) bool {
	return slices.ContainsFunc(have, func(r rules.SecGroupRule) bool {
		return r.Direction == string(rules.DirIngress) && r.Protocol == string(rules.ProtocolTCP) &&
			r.PortRangeMin == port && r.PortRangeMax == port && r.RemoteIPPrefix == cidr
	})
}
