package openstack

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// A static address (CreateRequest.Network, contract §2.2) is a Neutron
// port the provider makes on the region's network with that fixed IP,
// before the server, and boots the server on (networks: [{port}]). The
// address is Neutron's from then on: the guest gets it from Neutron's
// DHCP, or, on a subnet without DHCP, from the metadata service's
// network_data.json (nova/virt/netutils.py get_network_metadata: the
// port's address with the subnet's netmask, the subnet's gateway as the
// default route, its dns_nameservers as resolvers). Neutron gives a port
// nothing but its fixed IP; the prefix length, gateway and resolvers are
// the subnet's. So the request's must be the subnet's, or Create refuses
// it naming the field before anything is made: delivering other ones
// would need a channel of the provider's own (user-data the cloud-init
// belongs to) and would disagree with what Neutron's DHCP and metadata
// tell the guest.
//
// The port outlives the server: Nova unbinds a port the caller passed in
// when it deletes the server, it does not delete it
// (nova/network/neutron.py deallocate_for_instance, preexisting_port_ids).
// Its ID is in the server's metadata (metaPort), and Delete deletes it
// before the server, as it does the server group: Neutron deletes a port a
// server still uses (Nova detaches it, network-vif-deleted), so every step
// resumes from the providerID alone, and a Delete cut after the port
// resumes at the server. Get reports exactly the address, recorded in the
// metadata too (metaAddress).
//
// The port is named after the instance and marked in its description,
// which Neutron keeps whatever its configuration: Zed takes tags in a
// port's create but keeps them only when ML2 loads the
// tag_ports_during_bulk_creation extension driver (the lane's Neutron,
// without it, answered 201 and kept none), and tagging after the create
// would be a second step to resume. A Create cut after the port finds it
// again by name and marks. Neutron's default
// policy lets only the network's owner (or an admin) choose a fixed IP
// (neutron/conf/policies/port.py, create_port:fixed_ips:ip_address): the
// region's network must be the project's own.

// The server's metadata keys for its port and its static address.
const (
	metaPort    = "egressproxies.io:port"
	metaAddress = "egressproxies.io:address"
)

// portDescription marks a port as the instance's: its Owner and UID in
// the contract's label form.
func portDescription(req contract.CreateRequest) string {
	return fmt.Sprintf("egress-proxies-operator: %s=%s %s=%s", contract.LabelManaged, req.Owner, contract.LabelUID, req.UID)
}

// portUID reads the UID back from a port's description, "" when it has
// no marks.
func portUID(description string) string {
	rest, ok := strings.CutPrefix(description, "egress-proxies-operator: ")
	if !ok {
		return ""
	}
	for _, f := range strings.Fields(rest) {
		if uid, ok := strings.CutPrefix(f, contract.LabelUID+"="); ok {
			return uid
		}
	}
	return ""
}

// ensurePort finds the instance's port or makes it, and returns its ID;
// "" without a static address or a floating IP (the port a floating IP
// is associated with: Neutron gives it an address of the network). The
// subnet is checked first, so a network Neutron cannot give is refused
// before anything is made.
func (p *Provider) ensurePort(ctx context.Context, pl plan, req contract.CreateRequest, managedGroup string) (string, error) {
	if req.Network == nil && pl.region.FloatingIPs == nil {
		return "", nil
	}
	var subnetID string
	var err error
	if req.Network != nil {
		if subnetID, err = p.subnetFor(ctx, pl, *req.Network); err != nil {
			return "", err
		}
	}
	var found []ports.Port
	err = p.do(ctx, "ListPorts", pl.regionKey, func(ctx context.Context, c *clients) error {
		if c.network == nil {
			return contract.Permanentf("region %q has no %s network endpoint in the catalogue; a static address or a floating IP needs Neutron", pl.region.Name, p.cfg.Interface)
		}
		pages, err := ports.List(c.network, ports.ListOpts{NetworkID: pl.region.Network, Name: req.Name}).AllPages(ctx)
		if err != nil {
			return err
		}
		found, err = ports.ExtractPorts(pages)
		return err
	})
	if err != nil {
		return "", err
	}
	log := logr.FromContextOrDiscard(ctx)
	for _, port := range found {
		if port.Name != req.Name || portUID(port.Description) != req.UID {
			continue // a person's port of the name: never used
		}
		if port.DeviceID != "" {
			// Unclassified: transient. The server holding it is on its
			// way out (a live one of this instance would have been found
			// and resumed): Nova unbinds the port once it is gone, and
			// would refuse a server on it until then (409 PortInUse).
			return "", fmt.Errorf("port %s of %s (%v) waits for server %s, which still uses it", port.ID, req.Name, port.FixedIPs, port.DeviceID)
		}
		if req.Network == nil || slices.ContainsFunc(port.FixedIPs, func(ip ports.IP) bool { return ip.IPAddress == req.Network.IP() }) {
			log.V(contract.LogStep).Info("found the port of an earlier attempt", "port", port.ID, "addresses", port.FixedIPs)
			return port.ID, nil
		}
		// An earlier attempt's port with another address, used by no
		// server: the request changed; it goes.
		if err := p.deletePort(ctx, pl.regionKey, port.ID); err != nil {
			return "", err
		}
	}
	sgs, err := p.portSecurityGroups(ctx, pl, managedGroup)
	if err != nil {
		return "", err
	}
	var id string
	err = p.do(ctx, "CreatePort", pl.regionKey, func(ctx context.Context, c *clients) error {
		opts := ports.CreateOpts{NetworkID: pl.region.Network, Name: req.Name, Description: portDescription(req), SecurityGroups: sgs}
		if req.Network != nil {
			opts.FixedIPs = []ports.IP{{SubnetID: subnetID, IPAddress: req.Network.IP()}}
		}
		port, err := ports.Create(ctx, c.network, opts).Extract()
		if err != nil {
			return err
		}
		id = port.ID
		return nil
	})
	if err == nil {
		log.V(contract.LogStep).Info("created port", "port", id)
	}
	return id, err
}

// subnetFor returns the ID of the region network's IPv4 subnet holding
// the address, or a permanent error naming the field Neutron cannot give
// as asked: the address (in no subnet, or another prefix length), the
// gateway or the resolvers.
func (p *Provider) subnetFor(ctx context.Context, pl plan, n contract.StaticNetwork) (string, error) {
	var all []subnets.Subnet
	err := p.do(ctx, "ListSubnets", pl.regionKey, func(ctx context.Context, c *clients) error {
		if c.network == nil {
			return contract.Permanentf("region %q has no %s network endpoint in the catalogue; a static address needs Neutron", pl.region.Name, p.cfg.Interface)
		}
		pages, err := subnets.List(c.network, subnets.ListOpts{NetworkID: pl.region.Network, IPVersion: 4}).AllPages(ctx)
		if err != nil {
			return err
		}
		all, err = subnets.ExtractSubnets(pages)
		return err
	})
	if err != nil {
		return "", err
	}
	var cidrs []string
	for _, s := range all {
		cidr, err := netip.ParsePrefix(s.CIDR)
		if err != nil || !cidr.Addr().Is4() {
			continue
		}
		cidrs = append(cidrs, s.CIDR)
		if !cidr.Contains(n.Address.Addr()) {
			continue
		}
		switch dns := addrs(n.DNS); {
		case cidr.Bits() != n.Address.Bits():
			return "", contract.InvalidField("network.address", n.Address.String(), fmt.Sprintf("is in subnet %s (%s) of network %s, whose prefix length the guest is given", s.ID, s.CIDR, pl.region.Network))
		case s.GatewayIP != n.Gateway.String():
			return "", contract.InvalidField("network.gateway", n.Gateway.String(), fmt.Sprintf("is not the gateway of subnet %s (%s), %q, which Neutron gives the guest", s.ID, s.CIDR, s.GatewayIP))
		case len(dns) > 0 && !slices.Equal(dns, s.DNSNameservers):
			return "", contract.InvalidField("network.dns", strings.Join(dns, ","), fmt.Sprintf("are not the resolvers of subnet %s (%s), %v, which Neutron gives the guest", s.ID, s.CIDR, s.DNSNameservers))
		}
		return s.ID, nil
	}
	return "", contract.InvalidField("network.address", n.Address.String(), fmt.Sprintf("is in no IPv4 subnet of network %s (%s)", pl.region.Network, strings.Join(cidrs, ", ")))
}

func addrs(list []netip.Addr) []string {
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.String()
	}
	return out
}

// portSecurityGroups are the port's groups, by ID as Neutron takes them:
// the managed group and the configured ones, or nil (the project's
// default group) when neither is set, as a server without a port gets
// Nova's "default". Nova applies a create's security groups only to the
// ports it makes itself (nova/network/neutron.py
// _create_ports_for_instance), so a port passed in carries its own.
func (p *Provider) portSecurityGroups(ctx context.Context, pl plan, managedGroup string) (*[]string, error) {
	names := pl.region.SecurityGroups
	if len(names) == 0 && managedGroup == "" {
		return nil, nil
	}
	var ids []string
	for _, name := range names {
		var found []groups.SecGroup
		err := p.do(ctx, "ListSecurityGroups", pl.regionKey, func(ctx context.Context, c *clients) error {
			pages, err := groups.List(c.network, groups.ListOpts{Name: name, ProjectID: p.project()}).AllPages(ctx)
			if err != nil {
				return err
			}
			found, err = groups.ExtractGroups(pages)
			return err
		})
		if err != nil {
			return nil, err
		}
		// Nova refuses a name two of the project's groups share
		// (NoUniqueMatch) and one none has (SecurityGroupNotFound); so
		// does the provider. Another project's groups are not looked at,
		// as Nova does not (nova/network/neutron.py
		// _process_security_groups lists the project's only): an admin
		// token sees every project's "default".
		if len(found) != 1 {
			return nil, contract.Permanentf("regions[%q].securityGroups: %d security groups are named %q; want exactly one", pl.regionKey, len(found), name)
		}
		ids = append(ids, found[0].ID)
	}
	if managedGroup != "" {
		ids = append(ids, managedGroup)
	}
	return &ids, nil
}

// deletePort deletes a port; one already gone is success.
func (p *Provider) deletePort(ctx context.Context, regionKey, id string) error {
	err := p.do(ctx, "DeletePort", regionKey, func(ctx context.Context, c *clients) error {
		if c.network == nil {
			return contract.Permanentf("region %q has no %s network endpoint in the catalogue; its ports cannot be deleted", p.cfg.Regions[regionKey].Name, p.cfg.Interface)
		}
		return ports.Delete(ctx, c.network, id).ExtractErr()
	})
	if isStatus(err, 404) || contract.ClassOf(err) == contract.ClassNotFound {
		return nil
	}
	if err == nil {
		logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("deleted port", "port", id)
	}
	return err
}

// deletePortOf deletes the port the server's metadata names, if any.
func (p *Provider) deletePortOf(ctx context.Context, regionKey string, s serverMeta) error {
	if id := s[metaPort]; id != "" {
		return p.deletePort(ctx, regionKey, id)
	}
	return nil
}

// serverMeta is a server's metadata.
type serverMeta = map[string]string
