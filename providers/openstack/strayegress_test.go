package openstack

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// makeStrayFloatingIP allocates, as the tenant's user and through
// Neutron's API as another tool would, a floating IP on the region's
// external network whose description carries the provider's mark prefix
// with the managed mark valued owner (and the UID mark valued uid, unless
// "") and no replica mark (contracttest.StrayEgressMaker, for the fake's
// control and the real services'). release deletes it.
func makeStrayFloatingIP(ctx context.Context, cfg Config, regionKey, owner, uid string) (string, func() error, error) {
	region, ok := cfg.Regions[regionKey]
	if !ok || region.FloatingIPs == nil {
		return "", nil, fmt.Errorf("control: region %q has no floating IPs configured", regionKey)
	}
	p, err := New(cfg)
	if err != nil {
		return "", nil, err
	}
	c, err := p.session(ctx, regionKey)
	if err != nil {
		return "", nil, err
	}
	description := fmt.Sprintf("%s%s=%s", fipMarkPrefix, contract.LabelManaged, owner)
	if uid != "" {
		description += fmt.Sprintf(" %s=%s", contract.LabelUID, uid)
	}
	f, err := floatingips.Create(ctx, c.network, floatingips.CreateOpts{FloatingNetworkID: region.FloatingIPs.Network, Description: description}).Extract()
	if err != nil {
		return "", nil, fmt.Errorf("control: allocate a stray floating IP: %w", err)
	}
	// Released when the rule ends, after its context may have.
	later := context.WithoutCancel(ctx)
	return f.FloatingIP, func() error {
		err := floatingips.Delete(later, c.network, f.ID).ExtractErr()
		switch {
		case gophercloud.ResponseCodeIs(err, http.StatusNotFound):
			return fmt.Errorf("control: the stray floating IP %s is gone: something released it", f.FloatingIP)
		case err != nil:
			return fmt.Errorf("control: delete the stray floating IP %s: %w", f.FloatingIP, err)
		}
		return nil
	}, nil
}

// MakeStrayEgress keeps a floating IP with the managed mark and no replica
// mark on the fake (makeStrayFloatingIP).
func (k control) MakeStrayEgress(ctx context.Context, region, owner, uid string) (string, func() error, error) {
	return makeStrayFloatingIP(ctx, k.c.cfg, region, owner, uid)
}

// MakeStrayEgress keeps a floating IP with the managed mark and no replica
// mark on the real services (makeStrayFloatingIP).
func (k *realControl) MakeStrayEgress(ctx context.Context, region, owner, uid string) (string, func() error, error) {
	return makeStrayFloatingIP(ctx, k.rc.tenant.cfg, region, owner, uid)
}
