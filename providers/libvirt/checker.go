package libvirt

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"libvirt.org/go/libvirt"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Check verifies, one cheap call each and in this order, per region: the
// connection (the transport's credentials and the daemon), the domain
// type (the host offers the configured one), the pool (exists, active),
// the network (exists, active), and each image (its base volume is in the
// pool, or else its URL answers a HEAD request) (template entry 16).
// Details: region — "libvirtVersion", "hostname"; domainType —
// "domainType" (what new domains get), "kvmOffered"; pool —
// "availableBytes"; network — "bridge"; image — "inPool" ("true" or
// "false").
func (p *Provider) Check(ctx context.Context) []contract.CheckResult {
	var results []contract.CheckResult
	for _, rn := range slices.Sorted(maps.Keys(p.cfg.Regions)) {
		region := p.cfg.Regions[rn]
		results = append(results, p.check(ctx, rn, "region/"+rn, func(c *libvirt.Connect) (map[string]string, error) {
			v, err := c.GetLibVersion()
			if err != nil {
				return nil, err
			}
			host, err := c.GetHostname()
			if err != nil {
				return nil, err
			}
			return map[string]string{"libvirtVersion": fmt.Sprintf("%d.%d.%d", v/1000000, v/1000%1000, v%1000), "hostname": host}, nil
		}))
		results = append(results, p.check(ctx, rn, "region/"+rn+"/domainType", func(c *libvirt.Connect) (map[string]string, error) {
			return p.checkDomainType(rn, c)
		}))
		results = append(results, p.check(ctx, rn, "region/"+rn+"/pool", func(c *libvirt.Connect) (map[string]string, error) {
			var details map[string]string
			err := withPool(c, region.Pool, func(pool *libvirt.StoragePool) error {
				info, err := pool.GetInfo()
				if err != nil {
					return err
				}
				if info.State != libvirt.STORAGE_POOL_RUNNING {
					return contract.Permanentf("pool %q is not active (state %d); virsh pool-start %s", region.Pool, info.State, region.Pool)
				}
				details = map[string]string{"availableBytes": strconv.FormatUint(info.Available, 10)}
				return nil
			})
			return details, err
		}))
		results = append(results, p.check(ctx, rn, "region/"+rn+"/network", func(c *libvirt.Connect) (map[string]string, error) {
			net, err := c.LookupNetworkByName(region.Network)
			if err != nil {
				return nil, err
			}
			defer func() { _ = net.Free() }()
			if active, err := net.IsActive(); err != nil {
				return nil, err
			} else if !active {
				return nil, contract.Permanentf("network %q is not active; virsh net-start %s", region.Network, region.Network)
			}
			bridge, _ := net.GetBridgeName()
			return map[string]string{"bridge": bridge}, nil
		}))
		for _, key := range slices.Sorted(maps.Keys(p.cfg.Images)) {
			results = append(results, p.checkImage(ctx, rn, key))
		}
	}
	return results
}

// checkDomainType: the host offers the configured domain type. An
// explicit kvm on a host without it would fail every Create's start
// (ERR_CONFIG_UNSUPPORTED); "auto" and qemu always pass and say what new
// domains get.
func (p *Provider) checkDomainType(rn string, c *libvirt.Connect) (map[string]string, error) {
	kvm, err := offersKVM(c)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.kvm[rn] = kvm
	p.mu.Unlock()
	if p.cfg.DomainType == DomainTypeKVM && !kvm {
		return nil, contract.Permanentf("domainType %q: the host does not offer KVM (its capabilities list no kvm domain for its architecture); set domainType auto or qemu, or enable KVM on the host", p.cfg.DomainType)
	}
	return map[string]string{"domainType": p.domainType(rn), "kvmOffered": strconv.FormatBool(kvm)}, nil
}

// checkImage: the base volume is complete in the pool, or the catalogue
// URL answers, so the first Create can fetch it.
func (p *Provider) checkImage(ctx context.Context, rn, key string) contract.CheckResult {
	target := "region/" + rn + "/image/" + key
	e := p.cfg.Images[key]
	dest := &poolDestination{p: p, region: rn, pool: p.cfg.Regions[rn].Pool}
	done, err := dest.Complete(ctx, baseName(key, e))
	if err != nil {
		return p.result(target, err)
	}
	if done {
		return contract.CheckResult{Target: target, OK: true, Reason: contract.ReasonOK, Details: map[string]string{"inPool": "true"}}
	}
	hctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout.Duration)
	defer cancel()
	req, err := http.NewRequestWithContext(hctx, http.MethodHead, e.URL, nil)
	if err != nil {
		return p.result(target, contract.Permanentf("image %s: %w", key, err))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if hctx.Err() != nil {
			return p.result(target, fmt.Errorf("image %s: %w", key, hctx.Err()))
		}
		// The error would repeat the URL, which may carry a token.
		return contract.CheckResult{Target: target, Reason: contract.ReasonUnreachable, Message: fmt.Sprintf("image %s: the catalogue URL does not answer", key)}
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return contract.CheckResult{Target: target, Reason: contract.ReasonNotFound, Message: fmt.Sprintf("image %s: the catalogue URL answers %s", key, resp.Status)}
	}
	return contract.CheckResult{Target: target, OK: true, Reason: contract.ReasonOK, Details: map[string]string{"inPool": "false"}}
}

func (p *Provider) check(ctx context.Context, region, target string, fn func(*libvirt.Connect) (map[string]string, error)) contract.CheckResult {
	var details map[string]string
	err := p.do(ctx, region, "Check", p.cfg.CallTimeout.Duration, func(c *libvirt.Connect) (err error) {
		details, err = fn(c)
		return err
	})
	r := p.result(target, err)
	if err == nil {
		r.Details = details
	}
	return r
}

// result maps an error to a check result: libvirt's codes tell
// authentication, permission, reachability and missing objects apart.
func (p *Provider) result(target string, err error) contract.CheckResult {
	r := contract.ResultFromError(target, err)
	if err == nil || r.Reason == contract.ReasonTimeout {
		return r
	}
	switch code(err) {
	case libvirt.ERR_AUTH_FAILED, libvirt.ERR_AUTH_CANCELLED, libvirt.ERR_AUTH_UNAVAILABLE:
		r.Reason = contract.ReasonUnauthenticated
	case libvirt.ERR_ACCESS_DENIED, libvirt.ERR_OPERATION_DENIED:
		r.Reason = contract.ReasonForbidden
	case libvirt.ERR_NO_CONNECT, libvirt.ERR_RPC, libvirt.ERR_SYSTEM_ERROR:
		r.Reason = contract.ReasonUnreachable
	case libvirt.ERR_NO_STORAGE_POOL, libvirt.ERR_NO_NETWORK:
		r.Reason = contract.ReasonNotFound
	default:
		if contract.ClassOf(err) == contract.ClassPermanent {
			r.Reason = contract.ReasonMisconfigured
		}
	}
	return r
}
