package openstack

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"

	"github.com/go-logr/logr"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/limits"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// The options users of an OpenStack provider expect (the shapes Cluster
// API Provider OpenStack gives them: configDrive, managed security
// groups, server groups), set per region: whether a network has a
// metadata service, which clients reach the servers and how many hosts
// there are to spread over are properties of a region's network and
// hosts. docs/openstack-provider-spec.md entry 25 gives the reasons.

// ManagedSecurityGroup has the provider keep one security group per
// region (securitygroups.go): an ingress rule opens each
// Proxy's Port over TCP to every network of AllowedClients, and every
// server of the region gets the group.
type ManagedSecurityGroup struct {
	// AllowedClients are the networks (CIDRs, at most 64) the proxy port
	// is opened to. The Proxy's own allowedClients are enforced by the
	// proxy itself (cloud-init); these are the networks the cloud lets
	// through to it, so list the networks the clients come from (the
	// cluster's node or egress networks).
	AllowedClients []string `json:"allowedClients"`
}

// Server group policies the provider accepts: the point is to spread a
// Proxy's servers over hosts (affinity would put them on one).
const (
	policyAntiAffinity     = "anti-affinity"
	policySoftAntiAffinity = "soft-anti-affinity"
)

// maxAllowedClients bounds AllowedClients: each is one rule per port, and
// Neutron's default quota is 100 rules per project.
const maxAllowedClients = 64

// validateOptions checks the region's options, each problem naming the
// field and value.
func (r Region) validateOptions(key string) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if m := r.ManagedSecurityGroup; m != nil {
		if len(m.AllowedClients) == 0 {
			add("regions[%q].managedSecurityGroup.allowedClients: at least one network is required", key)
		}
		if len(m.AllowedClients) > maxAllowedClients {
			add("regions[%q].managedSecurityGroup.allowedClients: %d networks, at most %d", key, len(m.AllowedClients), maxAllowedClients)
		}
		for i, cidr := range m.AllowedClients {
			if msg := clientNetworkProblem(cidr); msg != "" {
				add("regions[%q].managedSecurityGroup.allowedClients[%d] %q: %s", key, i, cidr, msg)
			}
		}
	}
	switch r.ServerGroupPolicy {
	case "", policyAntiAffinity, policySoftAntiAffinity:
	default:
		add("regions[%q].serverGroupPolicy %q: want %s or %s", key, r.ServerGroupPolicy, policyAntiAffinity, policySoftAntiAffinity)
	}
	if f := r.FloatingIPs; f != nil && !uuidRE.MatchString(f.Network) {
		add("regions[%q].floatingIPs.network %q: want the external network's ID", key, f.Network)
	}
	return errs
}

// clientNetworkProblem says what is wrong with an allowed client network,
// or "". The bounds are the Proxy CRD's own for allowedClients (/8 or
// longer for IPv4, /7 for IPv6): the port is never opened to the world.
// A network must be given by its network address, as Neutron stores it,
// so the rule the provider looks for is the rule Neutron keeps.
func clientNetworkProblem(cidr string) string {
	p, err := netip.ParsePrefix(cidr)
	switch {
	case err != nil:
		return "want a CIDR such as 10.0.0.0/8"
	case p != p.Masked():
		return fmt.Sprintf("want the network's address, %s", p.Masked())
	case p.Addr().Is4() && p.Bits() < 8, p.Addr().Is6() && p.Bits() < 7:
		return "an IPv4 network must be /8 or longer and an IPv6 one /7 or longer: the proxy is never open to the world"
	}
	return ""
}

// extras are what the region's options and a static address add to a
// server create.
type extras struct {
	securityGroup string // the managed group's ID
	serverGroup   string // the Proxy's server group's ID
	configDrive   bool
	port, address string // the static address's port (ports.go) and its IP
}

// prepareExtras makes (or finds) what the options, a static address and
// a floating IP need before the server is created. The port comes before the server
// group: its subnet check refuses a network Neutron cannot give before
// anything of the Proxy's own is made (the managed group is shared).
func (p *Provider) prepareExtras(ctx context.Context, pl plan, req contract.CreateRequest) (e extras, err error) {
	e.configDrive = pl.region.ConfigDrive
	if e.securityGroup, err = p.ensureSecurityGroup(ctx, pl, req); err != nil {
		return e, err
	}
	if e.port, err = p.ensurePort(ctx, pl, req, e.securityGroup); err != nil {
		return e, err
	}
	if _, err = p.ensureFloatingIP(ctx, pl, req, e.port); err != nil {
		return e, err
	}
	if req.Network != nil {
		e.address = req.Network.IP()
	}
	e.serverGroup, err = p.ensureServerGroup(ctx, pl, req)
	return e, err
}

// apply adds the extras to a server create and returns its scheduler
// hints (nil without a server group). The managed group is given by ID:
// Nova refuses a name two groups share (NoUniqueMatch, 409). config_drive
// is sent only when set, so a cloud whose policy forbids it sees the
// request it saw before.
//
// With a static address the server boots on its port alone, and its
// groups are the port's: Nova applies a create's security groups only to
// ports it makes (ports.go). The port's ID and address go in the
// metadata beside the marks, for Delete and Get.
func (e extras) apply(opts *servers.CreateOpts) servers.SchedulerHintOptsBuilder {
	if e.securityGroup != "" {
		opts.SecurityGroups = append(slices.Clone(opts.SecurityGroups), e.securityGroup)
	}
	if e.configDrive {
		opts.ConfigDrive = &e.configDrive
	}
	opts.Metadata = maps.Clone(opts.Metadata)
	if e.port != "" {
		opts.Networks = []servers.Network{{Port: e.port}}
		opts.SecurityGroups = nil
		opts.Metadata[metaPort], opts.Metadata[metaAddress] = e.port, e.address
	}
	if e.serverGroup == "" {
		return nil
	}
	opts.Metadata[metaServerGroup] = e.serverGroup
	return servers.SchedulerHintOpts{Group: e.serverGroup}
}

// undoExtras deletes the server group and the port a refused create
// made, or a create refused before its server's submission (a floating
// IP's lookup, a server group's create) (contract §4.10): the API refused
// (4xx) or was unavailable (503), so no server was made and none will use
// them; the port holds the
// Proxy's address. A 500, a gateway's 502 or 504, or no answer at all may
// hide a server that was made; they then stay for the retry, which finds
// them all. The security group is shared and stays.
func (p *Provider) undoExtras(ctx context.Context, pl plan, e extras, createErr error) {
	var code gophercloud.ErrUnexpectedResponseCode
	if !errors.As(createErr, &code) {
		return
	}
	if refused := code.Actual >= 400 && code.Actual <= 499 || code.Actual == 503; !refused {
		return
	}
	log := logr.FromContextOrDiscard(ctx)
	if e.serverGroup != "" {
		if err := p.deleteServerGroup(ctx, pl.regionKey, e.serverGroup); err != nil {
			log.Error(err, "could not delete the server group of a refused create; the next Create uses it", "serverGroup", e.serverGroup)
		}
	}
	if e.port != "" {
		if err := p.deletePort(ctx, pl.regionKey, e.port); err != nil {
			log.Error(err, "could not delete the port of a refused create; the next Create uses it", "port", e.port)
		}
	}
}

// checkOptions are the Checker's targets for the region's options, one
// cheap call each: with a managed security group, one page of one group
// (Neutron is in the catalogue and the credential may read groups); with
// a server group policy, Nova's server group quota (each Proxy needs a
// group, so a used-up quota stops new Proxies).
func (p *Provider) checkOptions(ctx context.Context, rk string) []contract.CheckResult {
	region := p.cfg.Regions[rk]
	var out []contract.CheckResult
	if region.ManagedSecurityGroup != nil {
		out = append(out, p.check(ctx, "region/"+rk+"/securityGroups", rk, func(ctx context.Context, c *clients) (map[string]string, error) {
			if c.network == nil {
				return nil, contract.Permanentf("region %q has no %s network endpoint in the catalogue; managedSecurityGroup needs Neutron", region.Name, p.cfg.Interface)
			}
			_, err := groups.List(c.network, groups.ListOpts{Limit: 1}).AllPages(ctx)
			return map[string]string{"network": hostOf(c.network.Endpoint)}, err
		}))
	}
	if region.ServerGroupPolicy != "" {
		out = append(out, p.check(ctx, "region/"+rk+"/serverGroups", rk, func(ctx context.Context, c *clients) (map[string]string, error) {
			l, err := limits.Get(ctx, c.compute, nil).Extract()
			if err != nil {
				return nil, err
			}
			a := l.Absolute
			d := map[string]string{"serverGroupsUsed": strconv.Itoa(a.TotalServerGroupsUsed), "serverGroupsMax": strconv.Itoa(a.MaxServerGroups)}
			if a.MaxServerGroups >= 0 && a.TotalServerGroupsUsed >= a.MaxServerGroups {
				return d, contract.Quota(fmt.Errorf("the server group quota of region %q is used up: %d of %d; each Proxy needs one", region.Name, a.TotalServerGroupsUsed, a.MaxServerGroups))
			}
			return d, nil
		}))
	}
	return out
}
