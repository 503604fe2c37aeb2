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
// region and Owner, not one per Proxy. Neutron's default quota is 10
// groups per project (neutron/conf/quota.py, DEFAULT_QUOTA_SG), so a
// group per Proxy would stop the eleventh Proxy; Cluster API Provider
// OpenStack likewise manages groups per cluster, not per machine. The
// group holds one ingress rule per (port, allowed client network); Create
// adds the rules its request's Port needs. The group is made once and
// shared by every server of the Owner in the region, like an image: it is
// not a secondary resource of an instance (contract §4.10), Delete leaves
// it, and the guide says how to remove it once no Proxy of the Owner
// remains. A rule of a port no Proxy uses any more stays with it; it
// opens a port nothing listens on.

// managedGroupDescription marks a group this provider made. Neutron (Zed)
// takes no tags in a security group's create body
// (neutron/extensions/tagging.py: tags are set by PUT .../tags after), so
// a Create cut between the two leaves a group with the name and this
// description but no tags, which the next Create tags and uses.
const managedGroupDescription = "egress-proxies-operator: opens proxy ports to the allowed client networks"

// managedGroupName is the Owner's group's name. An Owner is a DNS-1123
// label, so the name fits Neutron's 255 characters.
func managedGroupName(owner string) string { return "egressproxies-" + owner }

// ensureSecurityGroup finds or makes the region's group for req.Owner,
// adds the ingress rules req.Port needs and returns the group's ID; ""
// when the region does not manage security groups.
func (p *Provider) ensureSecurityGroup(ctx context.Context, pl plan, req contract.CreateRequest) (string, error) {
	m := pl.region.ManagedSecurityGroup
	if m == nil {
		return "", nil
	}
	// One Create at a time per group: two Proxies' Creates racing would
	// each make a group.
	done, err := p.creating.lock(ctx, "security-group/"+pl.regionKey+"/"+req.Owner)
	if err != nil {
		return "", err
	}
	defer done()
	name, tags := managedGroupName(req.Owner), []string{tagManaged, ownerTag(req.Owner)}
	var g *groups.SecGroup
	err = p.do(ctx, "ListSecurityGroups", pl.regionKey, func(ctx context.Context, c *clients) error {
		if c.network == nil {
			return contract.Permanentf("region %q has no %s network endpoint in the catalogue; managedSecurityGroup needs Neutron", pl.region.Name, p.cfg.Interface)
		}
		pages, err := groups.List(c.network, groups.ListOpts{Name: name}).AllPages(ctx)
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
