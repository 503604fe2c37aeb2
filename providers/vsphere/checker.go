package vsphere

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Check verifies, one cheap lookup each and in this order: the session
// (credentials), then per region its datacenter and folder, per zone its
// resource pool, datastore (or datastore cluster), host and network, and each image's template in each region
// (template entry 16). Details: "moref" is the managed object the target
// resolved to; for credentials, the server's product name.
func (p *Provider) Check(ctx context.Context) []contract.CheckResult {
	results := []contract.CheckResult{p.check(ctx, "credentials", func(ctx context.Context, c *vim25.Client) (string, error) {
		// A real call: the session must still be valid on the server.
		us, err := session.NewManager(c).UserSession(ctx)
		if err != nil {
			return "", err
		}
		if us == nil {
			return "", errors.New("the session is no longer valid")
		}
		return c.ServiceContent.About.FullName, nil
	})}
	for _, rn := range slices.Sorted(maps.Keys(p.cfg.Regions)) {
		region := p.cfg.Regions[rn]
		results = append(results, p.check(ctx, "region/"+rn+"/folder", func(ctx context.Context, c *vim25.Client) (string, error) {
			f, err := p.finder(ctx, c, region)
			if err != nil {
				return "", err
			}
			folder, err := f.Folder(ctx, region.Folder)
			if err != nil {
				return "", err
			}
			return folder.Reference().Value, nil
		}))
		for _, zn := range slices.Sorted(maps.Keys(region.Zones)) {
			zone := region.Zones[zn]
			results = append(results, p.check(ctx, "region/"+rn+"/zone/"+zn, func(ctx context.Context, c *vim25.Client) (string, error) {
				f, err := p.finder(ctx, c, region)
				if err != nil {
					return "", err
				}
				if _, err = f.ResourcePool(ctx, zone.ResourcePool); err != nil {
					return "", fmt.Errorf("resource pool %q: %w", zone.ResourcePool, err)
				}
				var ds object.Reference
				if zone.Datastore != "" {
					ds, err = f.Datastore(ctx, zone.Datastore)
					if err != nil {
						return "", fmt.Errorf("datastore %q: %w", zone.Datastore, err)
					}
				} else if ds, err = f.DatastoreCluster(ctx, zone.DatastoreCluster); err != nil {
					return "", fmt.Errorf("datastore cluster %q: %w", zone.DatastoreCluster, err)
				}
				if zone.Host != "" {
					if _, err := f.HostSystem(ctx, zone.Host); err != nil {
						return "", fmt.Errorf("host %q: %w", zone.Host, err)
					}
				}
				if zone.Network != "" {
					if _, err := f.Network(ctx, zone.Network); err != nil {
						return "", fmt.Errorf("network %q: %w", zone.Network, err)
					}
				}
				return ds.Reference().Value, nil
			}))
		}
		for _, key := range slices.Sorted(maps.Keys(p.cfg.Images)) {
			results = append(results, p.check(ctx, "region/"+rn+"/image/"+key, func(ctx context.Context, c *vim25.Client) (string, error) {
				f, err := p.finder(ctx, c, region)
				if err != nil {
					return "", err
				}
				vm, err := f.VirtualMachine(ctx, p.cfg.Images[key])
				if err != nil {
					return "", fmt.Errorf("template %q: %w", p.cfg.Images[key], err)
				}
				return vm.Reference().Value, nil
			}))
		}
	}
	return results
}

func (p *Provider) check(ctx context.Context, target string, fn func(context.Context, *vim25.Client) (string, error)) contract.CheckResult {
	var detail string
	err := p.do(ctx, "Check", p.cfg.CallTimeout.Duration, func(ctx context.Context, c *vim25.Client) (err error) {
		detail, err = fn(ctx, c)
		return err
	})
	r := contract.ResultFromError(target, err)
	switch {
	case err == nil:
		r.Details = map[string]string{"moref": detail}
	case fault.Is(err, &types.InvalidLogin{}), fault.Is(err, &types.NotAuthenticated{}):
		r.Reason = contract.ReasonUnauthenticated
	case fault.Is(err, &types.NoPermission{}):
		r.Reason = contract.ReasonForbidden
	case isCertificateError(err):
		r.Reason = contract.ReasonUnreachable
	case errors.Is(err, contract.ErrPermanent) && r.Reason == contract.ReasonBackendError:
		r.Reason = contract.ReasonMisconfigured
	}
	return r
}
