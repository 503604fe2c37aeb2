package proxmox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	pve "github.com/luthermonson/go-proxmox"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Check verifies, per region in order (template entry 16): the
// credentials (the cluster's VM list, the call ListByTag makes), each
// zone's node and ISO storage (and clone storage with a full clone), and
// each image's template for every zone, as Create resolves it (a
// template of another node: its storages read too). Details: credentials
// "vms" (VMs listed); zone "node", "isoStorage", "isoAvailBytes", "clone"
// (linked, or full to the storage), "pool", "bridge", "vlan" when set;
// image "zone.<zone>" (the template's VMID and node, and the target node
// for a clone across nodes).
func (p *Provider) Check(ctx context.Context) []contract.CheckResult {
	var results []contract.CheckResult
	for _, rn := range slices.Sorted(maps.Keys(p.cfg.Regions)) {
		region := p.cfg.Regions[rn]
		results = append(results, p.check(ctx, "region/"+rn+"/credentials", func(ctx context.Context) (map[string]string, error) {
			vms, err := p.resources(ctx, rn)
			return map[string]string{"vms": strconv.Itoa(len(vms))}, err
		}))
		for _, zn := range slices.Sorted(maps.Keys(region.Zones)) {
			zone := region.Zones[zn]
			results = append(results, p.check(ctx, "region/"+rn+"/zone/"+zn, func(ctx context.Context) (map[string]string, error) {
				iso, err := p.storageStatus(ctx, rn, zone.Node, zone.ISOStorage)
				if err != nil {
					return nil, fmt.Errorf("isoStorage %q on node %q: %w", zone.ISOStorage, zone.Node, err)
				}
				if !slices.Contains(strings.Split(iso.Content, ","), "iso") {
					return nil, errMisconfigured{fmt.Sprintf("isoStorage %q on node %q does not allow the iso content type (it allows %q)", zone.ISOStorage, zone.Node, iso.Content)}
				}
				if p.cfg.fullClone(zone) {
					if _, err := p.storageStatus(ctx, rn, zone.Node, zone.Storage); err != nil {
						return nil, fmt.Errorf("storage %q on node %q: %w", zone.Storage, zone.Node, err)
					}
				}
				d := map[string]string{"node": zone.Node, "isoStorage": zone.ISOStorage, "isoAvailBytes": strconv.FormatUint(iso.Avail, 10), "clone": "linked"}
				if p.cfg.fullClone(zone) {
					d["clone"] = "full to " + zone.Storage
				}
				if pool := region.pool(zone); pool != "" {
					d["pool"] = pool
				}
				if n := zone.Network; n != nil {
					d["bridge"] = n.Bridge
					if n.VLAN != 0 {
						d["vlan"] = strconv.Itoa(n.VLAN)
					}
				}
				return d, nil
			}))
		}
		for _, key := range slices.Sorted(maps.Keys(p.cfg.Images)) {
			img := p.cfg.Images[key]
			results = append(results, p.check(ctx, "region/"+rn+"/image/"+key, func(ctx context.Context) (map[string]string, error) {
				return p.checkImage(ctx, rn, key, img)
			}))
		}
	}
	return results
}

// checkImage resolves the image for every zone of the region, as Create
// does (templates.go), so Check names the template each zone clones from
// and a zone that cannot clone it before any Create tries.
func (p *Provider) checkImage(ctx context.Context, region, key string, img Image) (map[string]string, error) {
	vms, err := p.resources(ctx, region)
	if err != nil {
		return nil, err
	}
	details := map[string]string{}
	var errs []error
	for _, zn := range slices.Sorted(maps.Keys(p.cfg.Regions[region].Zones)) {
		t, err := p.template(ctx, region, zn, key, img, vms)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		details["zone."+zn] = t.String()
	}
	return details, errors.Join(errs...)
}

type errMisconfigured struct{ msg string }

func (e errMisconfigured) Error() string { return e.msg }

func (p *Provider) storageStatus(ctx context.Context, region, node, storage string) (*pve.Storage, error) {
	var st pve.Storage
	err := p.call(ctx, region, "StorageStatus", func(ctx context.Context, c conn) error {
		return c.api.Get(ctx, "/nodes/"+url.PathEscape(node)+"/storage/"+url.PathEscape(storage)+"/status", &st)
	})
	return &st, err
}

var (
	missingRE = regexp.MustCompile(`does not exist|^no such cluster node|^hostname lookup|no template`)
	notTmplRE = regexp.MustCompile(`is not a template|templates named|uses local storage|: not shared|on other nodes`)
)

func (p *Provider) check(ctx context.Context, target string, fn func(context.Context) (map[string]string, error)) contract.CheckResult {
	if ctx.Err() != nil {
		return contract.ResultFromError(target, ctx.Err())
	}
	details, err := fn(ctx)
	r := contract.ResultFromError(target, err)
	status, msg := apiMessage(err)
	var mis errMisconfigured
	switch {
	case err == nil:
		r.Details = details
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		r.Reason = contract.ReasonTimeout
	case status == http.StatusUnauthorized:
		r.Reason = contract.ReasonUnauthenticated
	case status == http.StatusForbidden:
		r.Reason = contract.ReasonForbidden
	case errors.As(err, &mis), notTmplRE.MatchString(err.Error()):
		r.Reason = contract.ReasonMisconfigured
	case missingRE.MatchString(msg), missingRE.MatchString(err.Error()):
		r.Reason = contract.ReasonNotFound
	case isCertificateError(err), status == 0 && !errors.Is(err, contract.ErrPermanent) && !errors.Is(err, contract.ErrQuota):
		// A TLS failure, a refused or reset connection: the API is not reachable.
		r.Reason = contract.ReasonUnreachable
	}
	return r
}
