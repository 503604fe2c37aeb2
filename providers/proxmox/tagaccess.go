package proxmox

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	pve "github.com/luthermonson/go-proxmox"
)

// Tag access (gc-mark: native-labels with a description fallback). A
// cluster's datacenter.cfg may restrict which tags a token without
// Sys.Modify on / sets or removes (user-tag-access: free, list, existing,
// none; registered-tags), and PVE then refuses the whole config write with
// 403 "Permission check failed (/, Sys.Modify for modifying tag '<tag>')"
// (pve-guest-common GuestHelpers.pm assert_tag_permissions). The marks are
// in the description the clone writes in any case, so the tags are an
// index, not the record: the provider writes what the cluster allows.
//
// The levels, tried in order, one more PUT each the first time a region
// refuses (then remembered for the process's life):
//
//	tagsAll:   every mark (free, the default);
//	tagsFixed: the marks that are the same on every VM of an install —
//	           managed, owner-<owner>, started — which an administrator
//	           can put in user-allow-list; the per-Proxy uid and ctime
//	           are never listable;
//	tagsNone:  no tags (none, or a list without ours, or existing before
//	           any VM carries them, or registered-tags naming ours).
const (
	tagsAll = iota
	tagsFixed
	tagsNone
)

// tagDeniedRE is assert_tag_permissions' refusal (raise_perm_exc).
var tagDeniedRE = regexp.MustCompile(`^Permission check failed \(/, Sys\.Modify for modifying tag '[^']*'\)$`)

func isTagDenied(err error) bool {
	status, msg := apiMessage(err)
	return status == 403 && tagDeniedRE.MatchString(msg)
}

func (p *Provider) tagLevel(region string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tagLevels[region]
}

func (p *Provider) lowerTagLevel(region string, from int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tagLevels[region] == from {
		p.tagLevels[region] = from + 1
	}
}

// allowedOf keeps the marks the level writes.
func allowedOf(ours []string, level int) []string {
	switch level {
	case tagsAll:
		return ours
	case tagsFixed:
		return slices.DeleteFunc(slices.Clone(ours), func(t string) bool {
			return strings.HasPrefix(t, tagUID) || strings.HasPrefix(t, tagCTime)
		})
	}
	return nil
}

// configure writes opts and the VM's tags with ours added, as many of
// ours as the region's tag access allows (one PUT; one more per level a
// refusal lowers). It returns the tags written.
func (p *Provider) configure(ctx context.Context, v vmInfo, call string, opts []pve.VirtualMachineOption, ours ...string) (string, error) {
	for {
		level := p.tagLevel(v.region)
		existing := v.confString("tags")
		tags := withTags(existing, allowedOf(ours, level)...)
		all := slices.Clone(opts)
		if tags != strings.Join(splitTags(existing), ";") {
			all = append(all, pve.VirtualMachineOption{Name: "tags", Value: tags})
		}
		if len(all) == 0 {
			return existing, nil
		}
		err := p.call(ctx, v.region, call, func(ctx context.Context, c conn) error {
			return newVM(c.api, v.node, v.vmid).ConfigSync(ctx, all...)
		})
		if err == nil {
			return tags, nil
		}
		if !isTagDenied(err) || level == tagsNone {
			return "", err
		}
		logr.FromContextOrDiscard(ctx).Info("the cluster's user-tag-access refuses a mark tag; writing fewer (the marks stay in the description)",
			"region", v.region, "refused", fmt.Sprint(err), "level", level+1)
		p.lowerTagLevel(v.region, level)
	}
}

// listedMarks reads a VM of the cluster list: from its tags when they
// carry the marks (one call for the whole list), else from its config
// when it may be this operator's (two calls per VM): a VM of the range
// without tags (the mark window, or a cluster that allows none), or with
// the managed tag but not the per-Proxy ones (a cluster that allows only
// the fixed ones).
func (p *Provider) listedMarks(ctx context.Context, region string, r *pve.ClusterResource, owner string) (vmInfo, bool, error) {
	tags := splitTags(r.Tags)
	m := readMarks(r.Tags, "")
	if m.tagged {
		return vmInfo{region: region, node: r.Node, vmid: int(r.VMID), status: vmStatus{Name: r.Name, Status: r.Status}, marks: m}, true, nil
	}
	if slices.Contains(tags, tagManaged) {
		if owner != "" && m.owner != owner {
			// The owner tag already says it is another install's.
			return vmInfo{}, false, nil
		}
	} else if rng := p.cfg.Regions[region].VMIDs; int(r.VMID) < rng.Min || int(r.VMID) > rng.Max {
		return vmInfo{}, false, nil
	}
	return p.inMarkWindow(ctx, region, r)
}
