package openstack

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/availabilityzones"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/limits"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Check verifies, one cheap call each and in this order: the credential
// (Keystone validates the session's token: checkToken), then per
// region its compute quota (GET /limits), each zone (the availability
// zone list), each machine type's flavor and each image (template entry
// 16). Details: "method" (password or application_credential) for the
// credential; "instancesUsed", "instancesMax", "coresUsed", "coresMax"
// for a region; "flavorID" and "imageID" for catalogue entries.
func (p *Provider) Check(ctx context.Context) []contract.CheckResult {
	results := []contract.CheckResult{p.check(ctx, "credentials", p.firstRegion(), func(ctx context.Context, c *clients) (map[string]string, error) {
		if err := p.checkToken(ctx, c); err != nil {
			return nil, err
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		return map[string]string{"method": p.method}, nil
	})}
	for _, rk := range slices.Sorted(maps.Keys(p.cfg.Regions)) {
		region := p.cfg.Regions[rk]
		results = append(results, p.check(ctx, "region/"+rk, rk, func(ctx context.Context, c *clients) (map[string]string, error) {
			l, err := limits.Get(ctx, c.compute, nil).Extract()
			if err != nil {
				return nil, err
			}
			a := l.Absolute
			d := map[string]string{
				"instancesUsed": strconv.Itoa(a.TotalInstancesUsed), "instancesMax": strconv.Itoa(a.MaxTotalInstances),
				"coresUsed": strconv.Itoa(a.TotalCoresUsed), "coresMax": strconv.Itoa(a.MaxTotalCores),
			}
			if a.MaxTotalInstances >= 0 && a.TotalInstancesUsed >= a.MaxTotalInstances {
				return d, contract.Quota(fmt.Errorf("the instance quota of region %q is used up: %d of %d", region.Name, a.TotalInstancesUsed, a.MaxTotalInstances))
			}
			return d, nil
		}))
		results = append(results, p.checkOptions(ctx, rk)...)
		for _, zk := range slices.Sorted(maps.Keys(region.Zones)) {
			zone := region.Zones[zk]
			results = append(results, p.check(ctx, "region/"+rk+"/zone/"+zk, rk, func(ctx context.Context, c *clients) (map[string]string, error) {
				pages, err := availabilityzones.List(c.compute).AllPages(ctx)
				if err != nil {
					return nil, err
				}
				zones, err := availabilityzones.ExtractAvailabilityZones(pages)
				if err != nil {
					return nil, err
				}
				for _, z := range zones {
					if z.ZoneName == zone && z.ZoneState.Available {
						return map[string]string{"zone": zone}, nil
					}
				}
				return nil, contract.NotFound(fmt.Errorf("availability zone %q is not available in region %q", zone, region.Name))
			}))
		}
		for _, key := range slices.Sorted(maps.Keys(p.cfg.MachineTypes)) {
			results = append(results, p.checkRef(ctx, "region/"+rk+"/machineType/"+key, rk, "flavorID", func(ctx context.Context) (string, error) {
				return p.lookupFlavor(ctx, rk, p.cfg.MachineTypes[key])
			}))
		}
		for _, key := range slices.Sorted(maps.Keys(p.cfg.Images)) {
			results = append(results, p.checkRef(ctx, "region/"+rk+"/image/"+key, rk, "imageID", func(ctx context.Context) (string, error) {
				return p.lookupImage(ctx, rk, p.cfg.Images[key])
			}))
		}
	}
	return results
}

func (p *Provider) firstRegion() string { return slices.Sorted(maps.Keys(p.cfg.Regions))[0] }

// check runs one target's call through do.
func (p *Provider) check(ctx context.Context, target, regionKey string, fn func(context.Context, *clients) (map[string]string, error)) contract.CheckResult {
	var details map[string]string
	err := p.do(ctx, "Check", regionKey, func(ctx context.Context, c *clients) (err error) {
		details, err = fn(ctx, c)
		return err
	})
	r := result(target, err)
	r.Details = details
	return r
}

// checkToken checks the credential on the provider's session, which
// logs in only when it has none or the clouds file changed: Keystone
// validates the session's token (HEAD /v3/auth/tokens), rather than a
// login every round. A token Keystone revoked (a revoked application
// credential, a changed password) is refused with 401, and gophercloud
// logs in again: a refused credential then fails the check. A token
// replaced by that login is checked once more.
func (p *Provider) checkToken(ctx context.Context, c *clients) error {
	pc := c.compute.ProviderClient
	identity, err := openstack.NewIdentityV3(pc, gophercloud.EndpointOpts{})
	if err != nil {
		return err
	}
	for range 2 {
		valid, err := tokens.Validate(ctx, identity, pc.Token())
		if err != nil || valid {
			return err
		}
	}
	return errors.New("the session's token is not valid, and a new login did not validate either")
}

// checkRef runs a catalogue lookup, which goes through do itself.
func (p *Provider) checkRef(ctx context.Context, target, regionKey, detail string, lookup func(context.Context) (string, error)) contract.CheckResult {
	if ctx.Err() != nil {
		return result(target, fmt.Errorf("region %s: %w", regionKey, ctx.Err()))
	}
	id, err := lookup(ctx)
	r := result(target, err)
	if err == nil {
		r.Details = map[string]string{detail: id}
	}
	return r
}

// result maps err to the target's reason (contract §9).
func result(target string, err error) contract.CheckResult {
	r := contract.ResultFromError(target, err)
	var netErr net.Error
	switch {
	case err == nil || r.Reason == contract.ReasonTimeout:
	case isUnauthenticated(err):
		r.Reason = contract.ReasonUnauthenticated
	case isStatus(err, 403) && !errors.Is(err, contract.ErrQuota):
		r.Reason = contract.ReasonForbidden
	case isCertificateError(err), errors.As(err, &netErr):
		r.Reason = contract.ReasonUnreachable
	case errors.Is(err, contract.ErrPermanent) && r.Reason == contract.ReasonBackendError:
		r.Reason = contract.ReasonMisconfigured
	}
	return r
}
