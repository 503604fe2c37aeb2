package memprovider

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Check verifies the credential, each region and each catalogue image, in
// that order, one cheap call each (template entry 16). Details: "image"
// carries the Cloud image name an image key resolves to.
func (p *Provider) Check(ctx context.Context) []contract.CheckResult {
	results := []contract.CheckResult{p.check(ctx, "credentials", func(ctx context.Context) error {
		return p.cloud.WhoAmI(ctx, p.cfg.Token)
	})}
	for _, region := range p.cfg.Regions {
		results = append(results, p.check(ctx, "region/"+region, func(ctx context.Context) error {
			return p.cloud.GetRegion(ctx, p.cfg.Token, region)
		}))
	}
	for _, key := range slices.Sorted(maps.Keys(p.cfg.Images)) {
		r := p.check(ctx, "image/"+key, func(ctx context.Context) error {
			return p.cloud.GetImage(ctx, p.cfg.Token, p.cfg.Images[key])
		})
		r.Details = map[string]string{"image": p.cfg.Images[key]}
		results = append(results, r)
	}
	return results
}

func (p *Provider) check(ctx context.Context, target string, fn func(context.Context) error) contract.CheckResult {
	err := p.do(ctx, "Check", fn)
	r := contract.ResultFromError(target, err)
	var api *APIError
	if errors.As(err, &api) {
		switch api.Status {
		case 401:
			r.Reason = contract.ReasonUnauthenticated
		case 403:
			if !errors.Is(err, contract.ErrQuota) {
				r.Reason = contract.ReasonForbidden
			}
		}
	}
	return r
}
