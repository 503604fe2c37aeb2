package openstack

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Floating IPs (regions[].floatingIPs, contract.EgressKeeper): on a
// project network every server leaves through the router's shared SNAT
// address; a floating IP is the address a partner can allow-list. Each
// replica of a Proxy gets one, kept across the replica's servers until
// the operator releases it (docs/openstack-provider.md, "Floating IPs",
// cites the Neutron behaviour below):
//
//   - Create gives the server a port of its own (ports.go), then finds the
//     replica's floating IP by its marks, or creates it with them and the
//     port in one call (Zed takes a description but no tags in a floating
//     IP's create: the marks are in the description, which a list can
//     filter on), and associates it with the port; an update moves it
//     from the port of the replica's older server (_update_fip_assoc
//     never checks the current association), so the newest server holds
//     it;
//   - Delete leaves it: deleting the port disassociates it (ML2's
//     delete_port → disassociate_floatingips), and it waits for the
//     replica's next server;
//   - Get reads it from Neutron by the server's port: Nova's addresses
//     show it only once a network-changed event refreshed its cache;
//   - ListEgress lists the external network's floating IPs and reads the
//     marks back; ReleaseEgress deletes the replica's, or gives an address
//     of the region's set (Addresses) back to it.

// FloatingIPs is a region's floating-IP config.
type FloatingIPs struct {
	// Network is the ID of the external network the addresses come from;
	// the region's network must reach it through a router.
	Network string `json:"network"`
	// Addresses, when set, is the set replicas draw from: floating IPs of
	// Network allocated in the project beforehand (addresses partners
	// already allow-list). The provider never creates or deletes one: a
	// replica takes the first free one in this order (no marks, no port),
	// keeps it as any replica keeps its floating IP, and gives it back to
	// the set when released (disassociated, its marks cleared). None free
	// is ErrQuota, naming the addresses not allocated in the project.
	Addresses []string `json:"addresses,omitempty"`
}

// validate checks the config of region key before any call.
func (f *FloatingIPs) validate(key string) []string {
	var problems []string
	if !uuidRE.MatchString(f.Network) {
		problems = append(problems, fmt.Sprintf("regions[%q].floatingIPs.network %q: want an external network's ID", key, f.Network))
	}
	for i, a := range f.Addresses {
		ip, err := netip.ParseAddr(a)
		switch {
		case err != nil || !ip.Is4() || ip.String() != a:
			problems = append(problems, fmt.Sprintf("regions[%q].floatingIPs.addresses[%d] %q: want an IPv4 address", key, i, a))
		case slices.Index(f.Addresses, a) < i:
			problems = append(problems, fmt.Sprintf("regions[%q].floatingIPs.addresses[%d] %q: listed twice", key, i, a))
		}
	}
	return problems
}

// drawn tells an address of the set, which is given back, not deleted.
func (f *FloatingIPs) drawn(address string) bool { return slices.Contains(f.Addresses, address) }

// fipMarkPrefix starts the description that marks a floating IP as a
// replica's.
const fipMarkPrefix = "egress-proxies-operator: "

// fipDescription marks a floating IP as req's replica's.
func fipDescription(owner, uid string, replica int32) string {
	return fmt.Sprintf("%s%s=%s %s=%s %s=%d", fipMarkPrefix, contract.LabelManaged, owner, contract.LabelUID, uid, contract.LabelReplica, replica)
}

// fipMarks reads the marks back from a description; ok is false for a
// floating IP the provider did not make.
func fipMarks(description string) (owner, uid string, replica int32, ok bool) {
	rest, found := strings.CutPrefix(description, fipMarkPrefix)
	if !found {
		return "", "", 0, false
	}
	marks := map[string]string{}
	for _, f := range strings.Fields(rest) {
		if k, v, ok := strings.Cut(f, "="); ok {
			marks[k] = v
		}
	}
	r, err := strconv.ParseInt(marks[contract.LabelReplica], 10, 32)
	owner, uid = marks[contract.LabelManaged], marks[contract.LabelUID]
	return owner, uid, int32(r), err == nil && owner != "" && uid != ""
}

// KeepsEgress reports whether any region gives replicas floating IPs.
func (p *Provider) KeepsEgress() bool {
	return slices.ContainsFunc(slices.Collect(maps.Values(p.cfg.Regions)), func(r Region) bool { return r.FloatingIPs != nil })
}

// listFloatingIPs lists the region's floating IPs on its external network.
func (p *Provider) listFloatingIPs(ctx context.Context, regionKey string, opts floatingips.ListOpts) ([]floatingips.FloatingIP, error) {
	var all []floatingips.FloatingIP
	err := p.do(ctx, "ListFloatingIPs", regionKey, func(ctx context.Context, c *clients) error {
		if c.network == nil {
			return contract.Permanentf("region %q has no %s network endpoint in the catalogue; floating IPs need Neutron", p.cfg.Regions[regionKey].Name, p.cfg.Interface)
		}
		opts.FloatingNetworkID = p.cfg.Regions[regionKey].FloatingIPs.Network
		pages, err := floatingips.List(c.network, opts).AllPages(ctx)
		if err != nil {
			return err
		}
		all, err = floatingips.ExtractFloatingIPs(pages)
		return err
	})
	return all, err
}

// ensureFloatingIP finds req's replica's floating IP, or creates it (or
// draws it from the region's set), and associates it with the port,
// returning its address; "" when the region has none. A draw another
// replica won meanwhile (412) is tried again on a fresh list.
func (p *Provider) ensureFloatingIP(ctx context.Context, pl plan, req contract.CreateRequest, port string) (string, error) {
	if pl.region.FloatingIPs == nil {
		return "", nil
	}
	for attempt := 1; ; attempt++ {
		all, err := p.listFloatingIPs(ctx, pl.regionKey, floatingips.ListOpts{})
		if err != nil {
			return "", err
		}
		if i := slices.IndexFunc(all, func(f floatingips.FloatingIP) bool {
			_, uid, replica, ok := fipMarks(f.Description)
			return ok && uid == req.UID && replica == req.Replica
		}); i >= 0 {
			return p.associate(ctx, pl, all[i], port)
		}
		if len(pl.region.FloatingIPs.Addresses) == 0 {
			return p.createFloatingIP(ctx, pl, req, port)
		}
		address, err := p.drawFloatingIP(ctx, pl, req, port, all)
		if !errors.Is(err, errDrawnMeanwhile) || attempt == maxDraws {
			return address, err
		}
	}
}

// associate moves the replica's floating IP to the port: an update moves
// it from the port of the replica's older server too.
func (p *Provider) associate(ctx context.Context, pl plan, f floatingips.FloatingIP, port string) (string, error) {
	if f.PortID == port {
		return f.FloatingIP, nil
	}
	err := p.do(ctx, "AssociateFloatingIP", pl.regionKey, func(ctx context.Context, c *clients) error {
		_, err := floatingips.Update(ctx, c.network, f.ID, floatingips.UpdateOpts{PortID: &port}).Extract()
		return err
	})
	if err != nil {
		return "", fipError(pl, err)
	}
	logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("associated the replica's floating IP", "floatingIP", f.FloatingIP, "port", port, "previousPort", f.PortID)
	return f.FloatingIP, nil
}

func (p *Provider) createFloatingIP(ctx context.Context, pl plan, req contract.CreateRequest, port string) (string, error) {
	var address string
	err := p.do(ctx, "CreateFloatingIP", pl.regionKey, func(ctx context.Context, c *clients) error {
		f, err := floatingips.Create(ctx, c.network, floatingips.CreateOpts{
			FloatingNetworkID: pl.region.FloatingIPs.Network, PortID: port,
			Description: fipDescription(req.Owner, req.UID, req.Replica),
		}).Extract()
		if err == nil {
			address = f.FloatingIP
		}
		return err
	})
	if err != nil {
		return "", fipError(pl, err)
	}
	logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("created the replica's floating IP", "floatingIP", address, "port", port, "replica", req.Replica)
	return address, nil
}

// maxDraws bounds the draws of one Create that other replicas win.
const maxDraws = 3

// errDrawnMeanwhile is a draw whose address another replica took between
// the list and the update.
var errDrawnMeanwhile = errors.New("another replica drew the address meanwhile")

// drawFloatingIP takes the first free address of the region's set (no
// marks, no port) for req's replica: one update marks it and associates
// it, under If-Match on the revision the list read (Neutron's
// standard-attr-revisions: 412 when the address changed since, so two
// replicas never both take it; neutron/services/revisions/revision_plugin.py
// _enforce_if_match_constraints).
func (p *Provider) drawFloatingIP(ctx context.Context, pl plan, req contract.CreateRequest, port string, all []floatingips.FloatingIP) (string, error) {
	field := fmt.Sprintf("regions[%q].floatingIPs.addresses", pl.regionKey)
	var missing []string
	for _, address := range pl.region.FloatingIPs.Addresses {
		i := slices.IndexFunc(all, func(f floatingips.FloatingIP) bool { return f.FloatingIP == address })
		if i < 0 {
			missing = append(missing, address)
			continue
		}
		f := all[i]
		if _, _, _, marked := fipMarks(f.Description); marked || f.PortID != "" {
			continue
		}
		desc, rev := fipDescription(req.Owner, req.UID, req.Replica), f.RevisionNumber
		err := p.do(ctx, "DrawFloatingIP", pl.regionKey, func(ctx context.Context, c *clients) error {
			_, err := floatingips.Update(ctx, c.network, f.ID, floatingips.UpdateOpts{Description: &desc, PortID: &port, RevisionNumber: &rev}).Extract()
			return err
		})
		switch {
		case isStatus(err, 412):
			return "", fmt.Errorf("%s: %s: %w", field, address, errDrawnMeanwhile)
		case err != nil:
			return "", fipError(pl, err)
		}
		logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("drew the replica's floating IP from the set", "floatingIP", address, "port", port, "replica", req.Replica)
		return address, nil
	}
	detail := ""
	if len(missing) > 0 {
		detail = fmt.Sprintf("; not allocated in the project: %v", missing)
	}
	return "", contract.Quota(fmt.Errorf("%s: every address of the set is another replica's or in use (%d listed)%s", field, len(pl.region.FloatingIPs.Addresses), detail))
}

// fipError names the field behind Neutron's refusals that no retry
// clears: an external network that is not one (400 "Bad floatingip
// request: Network … is not a valid external network.") or does not
// exist (404 NetworkNotFound), or one the region's network does not reach
// through a router (404 ExternalGatewayForFloatingIPNotFound). An
// exhausted network or quota is ErrQuota already (classify.go).
func fipError(pl plan, err error) error {
	switch {
	case contract.ClassOf(err) == contract.ClassQuota:
		return err
	case isStatus(err, 400) && strings.Contains(err.Error(), "external network"),
		isStatus(err, 404) && strings.Contains(err.Error(), "NetworkNotFound"):
		return contract.InvalidField(fmt.Sprintf("regions[%q].floatingIPs.network", pl.regionKey), pl.region.FloatingIPs.Network,
			"Neutron refused it as the floating IPs' network: "+err.Error())
	case isStatus(err, 404) && strings.Contains(err.Error(), "ExternalGatewayForFloatingIPNotFound"):
		return contract.InvalidField(fmt.Sprintf("regions[%q].floatingIPs.network", pl.regionKey), pl.region.FloatingIPs.Network,
			"no router joins the region's network to it: "+err.Error())
	}
	return err
}

// egressOf is the address of the floating IP associated with the
// server's port, "" when the region has none or none is associated.
func (p *Provider) egressOf(ctx context.Context, regionKey string, meta serverMeta) (string, error) {
	if p.cfg.Regions[regionKey].FloatingIPs == nil || meta[metaPort] == "" {
		return "", nil
	}
	found, err := p.listFloatingIPs(ctx, regionKey, floatingips.ListOpts{PortID: meta[metaPort]})
	if err != nil || len(found) == 0 {
		return "", err
	}
	return found[0].FloatingIP, nil
}

// ListEgress lists the floating IPs marked with owner in every region
// that has them; one unreadable region fails the whole list.
func (p *Provider) ListEgress(ctx context.Context, owner string) ([]contract.Egress, error) {
	var out []contract.Egress
	for _, regionKey := range slices.Sorted(maps.Keys(p.cfg.Regions)) {
		if p.cfg.Regions[regionKey].FloatingIPs == nil {
			continue
		}
		all, err := p.listFloatingIPs(ctx, regionKey, floatingips.ListOpts{})
		if err != nil {
			return nil, fmt.Errorf("list the floating IPs of region %q: %w", regionKey, err)
		}
		for _, f := range all {
			if o, uid, replica, ok := fipMarks(f.Description); ok && o == owner {
				out = append(out, contract.Egress{Region: regionKey, UID: uid, Replica: replica, Owner: o, IP: f.FloatingIP})
			}
		}
	}
	return out, nil
}

// ReleaseEgress deletes the floating IPs of e's replica; none is nil.
func (p *Provider) ReleaseEgress(ctx context.Context, e contract.Egress) error {
	if err := e.Validate(); err != nil {
		return err
	}
	region, ok := p.cfg.Regions[e.Region]
	if !ok || region.FloatingIPs == nil {
		logr.FromContextOrDiscard(ctx).Info("region has no floating IPs configured; nothing to release", "region", e.Region)
		return nil
	}
	all, err := p.listFloatingIPs(ctx, e.Region, floatingips.ListOpts{})
	if err != nil {
		return err
	}
	for _, f := range all {
		if _, uid, replica, ok := fipMarks(f.Description); !ok || uid != e.UID || replica != e.Replica {
			continue
		}
		err := p.do(ctx, "DeleteFloatingIP", e.Region, func(ctx context.Context, c *clients) error {
			if region.FloatingIPs.drawn(f.FloatingIP) {
				// Back to the set: unmarked and disassociated.
				none := ""
				_, err := floatingips.Update(ctx, c.network, f.ID, floatingips.UpdateOpts{Description: &none, PortID: &none}).Extract()
				return err
			}
			return floatingips.Delete(ctx, c.network, f.ID).ExtractErr()
		})
		if err != nil && !isStatus(err, 404) && !errors.Is(err, contract.ErrNotFound) {
			return err
		}
		logr.FromContextOrDiscard(ctx).V(contract.LogOutcome).Info("released the replica's floating IP", "floatingIP", f.FloatingIP, "replica", e.Replica)
	}
	return nil
}
