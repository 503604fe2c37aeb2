package proxmox

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	pve "github.com/luthermonson/go-proxmox"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// templateRef is the template a zone's clones come from.
type templateRef struct {
	vmid int
	node string
	// target is the zone's node when the template is on another node: a
	// clone across nodes, which PVE allows from shared storage only.
	target string
}

// String is what Check reports per zone: "9000 on pve1", or "9000 on
// pve1 to pve2" for a clone across nodes.
func (t templateRef) String() string {
	s := strconv.Itoa(t.vmid) + " on " + t.node
	if t.target != "" {
		s += " to " + t.target
	}
	return s
}

// template resolves image imgKey for zone zoneKey of the region, before
// any clone (qemu-server API2/Qemu.pm clone_vm, PVE 8.4 and 9.1 alike):
//   - a template on the zone's node is cloned there: one template per
//     node, all of one name, lets every zone of a cluster of nodes with
//     local storage clone locally (CAPMOX's localStorage, bpg's per-node
//     templates);
//   - otherwise the region's one template of that name (or VMID) is
//     cloned with `target`, which PVE allows only when every disk and
//     CD-ROM of the template is on shared storage ("can't clone VM to
//     node '…' (VM uses local storage)") and, for a full clone with a
//     storage, only onto shared storage ("can't clone to non-shared
//     storage '…'"). The provider reads the template's config and the
//     storages' shared flag and refuses such a clone itself, naming the
//     zone, the node and the template: PVE's refusal names neither the
//     zone nor the fix.
func (p *Provider) template(ctx context.Context, region, zoneKey, imgKey string, img Image, vms pve.ClusterResources) (templateRef, error) {
	zone := p.cfg.Regions[region].Zones[zoneKey]
	var found, here []templateRef
	for _, r := range vms {
		if !isVM(r) || (img.TemplateVMID != 0 && int(r.VMID) != img.TemplateVMID) || (img.TemplateName != "" && r.Name != img.TemplateName) {
			continue
		}
		if r.Template != 1 {
			return templateRef{}, contract.Permanentf("images[%q]: VM %d (%s) in region %s is not a template", imgKey, r.VMID, r.Name, region)
		}
		t := templateRef{vmid: int(r.VMID), node: r.Node}
		found = append(found, t)
		if t.node == zone.Node {
			here = append(here, t)
		}
	}
	switch {
	case len(found) == 0:
		return templateRef{}, contract.Permanentf("images[%q]: no template %s in region %s", imgKey, imageName(img), region)
	case len(here) == 1:
		return here[0], nil
	case len(here) > 1:
		return templateRef{}, contract.Permanentf("images[%q]: %d templates named %q on node %s (zone %q of region %s): %s; keep one per node or name it by templateVMID",
			imgKey, len(here), img.TemplateName, zone.Node, zoneKey, region, refs(here))
	case len(found) > 1:
		return templateRef{}, contract.Permanentf("images[%q]: zone %q of region %s: no template %s on its node %s, and %d on other nodes (%s): put one on %s, or keep a single one on shared storage",
			imgKey, zoneKey, region, imageName(img), zone.Node, len(found), refs(found), zone.Node)
	}
	t := found[0]
	t.target = zone.Node
	if err := p.checkAcrossNodes(ctx, region, zoneKey, imgKey, t); err != nil {
		return templateRef{}, err
	}
	return t, nil
}

// checkAcrossNodes refuses a clone of t to another node that PVE would
// refuse: a disk or CD-ROM of the template on storage that is not shared
// (clone_vm's $check_storage_access_clone reads storage.cfg's shared
// flag, which GET …/storage/{storage}/status returns as `shared`), or a
// full clone onto a zone storage that is not shared.
func (p *Provider) checkAcrossNodes(ctx context.Context, region, zoneKey, imgKey string, t templateRef) error {
	zone := p.cfg.Regions[region].Zones[zoneKey]
	// The config alone (one call): the drives and the name.
	v := vmInfo{region: region, node: t.node, vmid: t.vmid}
	err := p.call(ctx, region, "GetTemplateConfig", func(ctx context.Context, c conn) error {
		return c.api.Get(ctx, vmPath(t.node, t.vmid)+"/config", &v.conf)
	})
	if err != nil {
		return fmt.Errorf("images[%q]: reading template %d on node %s: %w", imgKey, t.vmid, t.node, err)
	}
	var local []string
	for _, sid := range templateStorages(v.conf) {
		if strings.HasPrefix(sid, "/") {
			local = append(local, sid)
			continue
		}
		st, err := p.storageStatus(ctx, region, t.node, sid)
		if err != nil {
			return fmt.Errorf("images[%q]: storage %q of template %d on node %s: %w", imgKey, sid, t.vmid, t.node, err)
		}
		if st.Shared != 1 {
			local = append(local, sid)
		}
	}
	if len(local) > 0 {
		return contract.Permanentf("images[%q]: zone %q of region %s is node %s, but template %d is on node %s and uses local storage (%s): PVE refuses that clone (\"can't clone VM to node '%s' (VM uses local storage)\"); make a template %s on %s, or move this one to shared storage",
			imgKey, zoneKey, region, zone.Node, t.vmid, t.node, strings.Join(local, ", "), zone.Node, nameOrVMID(v), zone.Node)
	}
	if p.cfg.fullClone(zone) && zone.Storage != "" {
		st, err := p.storageStatus(ctx, region, zone.Node, zone.Storage)
		if err != nil {
			return fmt.Errorf("zones[%q].storage %q on node %s: %w", zoneKey, zone.Storage, zone.Node, err)
		}
		if st.Shared != 1 {
			return contract.Permanentf("zones[%q].storage %q: not shared, and template %d is on node %s, not the zone's node %s: PVE refuses that full clone (\"can't clone to non-shared storage '%s'\"); name a shared storage or make a template on %s",
				zoneKey, zone.Storage, t.vmid, t.node, zone.Node, zone.Storage, zone.Node)
		}
	}
	return nil
}

// driveKeyRE are the config keys that hold volumes (qemu-server
// QemuServer/Drive.pm valid_drive_names: ide0-3, sata0-5, scsi0-30,
// virtio0-15, efidisk0, tpmstate0); unusedN are not cloned.
var driveKeyRE = regexp.MustCompile(`^(ide|sata|scsi|virtio)\d+$|^efidisk0$|^tpmstate0$`)

// templateStorages are the storages the template's volumes are on, as
// $check_storage_access_clone walks them: a drive's file is
// "<storage>:<volume>", "none" or "cdrom" (no storage), or an absolute
// path (no storage: kept as it is, and never shared).
func templateStorages(conf map[string]any) []string {
	seen := map[string]bool{}
	for key, val := range conf {
		s, ok := val.(string)
		if !ok || !driveKeyRE.MatchString(key) {
			continue
		}
		file, _, _ := strings.Cut(s, ",")
		file = strings.TrimPrefix(file, "file=")
		switch {
		case file == "" || file == "none" || file == "cdrom":
		case strings.HasPrefix(file, "/"):
			seen[file] = true
		default:
			if sid, _, ok := strings.Cut(file, ":"); ok {
				seen[sid] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

func refs(ts []templateRef) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.String()
	}
	return strings.Join(parts, ", ")
}

func nameOrVMID(v vmInfo) string {
	if n := v.confString("name"); n != "" {
		return strconv.Quote(n)
	}
	return "VMID " + strconv.Itoa(v.vmid)
}

func imageName(img Image) string {
	if img.TemplateVMID != 0 {
		return "VMID " + strconv.Itoa(img.TemplateVMID)
	}
	return strconv.Quote(img.TemplateName)
}
