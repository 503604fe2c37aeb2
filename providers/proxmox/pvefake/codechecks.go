package pvefake

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// admit runs what PVE runs before and in a handler ahead of its work: the
// schema's parameter validation, the schema's permission check, then the
// checks the handler's code makes (codeChecks). It returns the endpoint
// the call matched (nil for a path the schema does not have, which the
// router answers 501) and its merged parameters. Caller holds s.mu.
func (s *Server) admit(req *request) (*endpoint, map[string]string, *apiError) {
	ep, vars := schemas[s.opts.Version].find(req.method, req.path)
	if ep == nil {
		return nil, nil, nil
	}
	params := map[string]string{}
	for k, v := range req.params {
		if len(v) > 0 {
			params[k] = v[0]
		}
	}
	if req.upload != nil {
		// pve-http-server passes the multipart file's name as "filename".
		params["filename"] = req.upload.name
	}
	for k, v := range vars {
		params[k] = v
	}
	s.served(ep, params)
	if err := ep.validate(params); err != nil {
		return ep, params, err
	}
	if err := s.schemaCheck(ep, params); err != nil {
		return ep, params, err
	}
	return ep, params, s.codeChecks(ep, params)
}

// The option groups of qemu-server src/PVE/API2/Qemu.pm
// check_vm_modify_config_perm ($cpuoptions, $memoryoptions,
// $hwtypeoptions, $generaloptions, $vmpoweroptions, $diskoptions,
// $cloudinitoptions; the same in PVE 8.4 and 9.1).
var configPrivOf = map[string]string{}

func init() {
	for priv, keys := range map[string]string{
		"VM.Config.CPU":     "cores cpu runningcpu cpulimit cpuunits numa smp sockets vcpus",
		"VM.Config.Memory":  "memory balloon shares allow-ksm",
		"VM.Config.HWType":  "acpi hotplug kvm machine runningmachine scsihw smbios1 tablet vga watchdog audio0 rng0",
		"VM.Config.Options": "agent autostart bios description keyboard localtime migrate_downtime migrate_speed name onboot ostype protection reboot startdate startup tdf template",
		"VM.PowerMgmt":      "freeze",
		"VM.Config.Disk":    "boot bootdisk vmstatestorage",
	} {
		for _, k := range strings.Fields(keys) {
			configPrivOf[k] = priv
		}
	}
	for _, k := range strings.Fields("cicustom cipassword citype ciuser ciupgrade nameserver searchdomain sshkeys") {
		configPrivOf[k] = "cloudinit"
	}
}

var (
	// driveRE is qemu-server's is_valid_drivename (src/PVE/QemuServer/Drive.pm).
	driveRE = regexp.MustCompile(`^(ide[0-3]|sata[0-5]|scsi([0-9]|[12][0-9]|30)|virtio([0-9]|1[0-5])|efidisk0|tpmstate0)$`)
	// valuePermRE are the keys check_vm_modify_config_perm leaves to
	// value-dependent checks elsewhere.
	valuePermRE = regexp.MustCompile(`^(unused|serial|usb|hostpci|virtiofs)\d+$`)
	netRE       = regexp.MustCompile(`^net\d+$`)
	ipconfigRE  = regexp.MustCompile(`^ipconfig\d+$`)
	// ownerRE reads the owner VM of a disk image's volume name
	// (pve-storage Plugin.pm parse_name_dir / parse_volname).
	ownerRE = regexp.MustCompile(`(?:^|/)(?:vm|base)-(\d+)-`)
)

// codeChecks are the permission checks PVE's handlers make in their code,
// beyond the schema's check (each cited in doc.go):
//
//   - clone (qemu-server API2/Qemu.pm clone_vm → $check_storage_access_clone,
//     check_bridge_access): Datastore.AllocateSpace on the storage of every
//     disk of the source (or on the target storage), Sys.Console on / for
//     a physical CD-ROM, SDN.Use on each bridge (/sdn/zones/localnetwork/
//     <bridge>[/<tag>], pve-guest-common GuestHelpers.pm check_vnet_access);
//   - config (update_vm): skiplock is root's only; per key
//     check_vm_modify_config_perm, then for a drive VM.Config.CDROM (a
//     CD-ROM) or VM.Config.Disk and check_volume_access on its volume, for
//     a NIC SDN.Use on its bridge, for tags VM.Config.Options
//     (assert_tag_permissions);
//   - content delete (pve-storage API2/Storage/Content.pm delete):
//     Datastore.Allocate on the storage (a backup volume:
//     Datastore.AllocateSpace and VM.Backup);
//   - task status and log (pve-manager API2/Tasks.pm read_task_status,
//     read_task_log): Sys.Audit on /nodes/<node> unless the token started it.
//
// A check on an object that does not exist is left to the handler's own
// error, as PVE reaches most of these after loading the config.
func (s *Server) codeChecks(ep *endpoint, params map[string]string) *apiError {
	switch ep.Method + " " + ep.Path {
	case "POST /nodes/{node}/qemu/{vmid}/clone":
		src := s.vms[atoiVMID(params["vmid"])]
		if src == nil {
			return nil
		}
		for _, k := range sortedKeys(src.conf) {
			if !driveRE.MatchString(k) {
				continue
			}
			file, opts := splitDrive(src.conf[k])
			switch {
			case file == "" || file == "none":
			case opts["media"] == "cdrom":
				if file == "cdrom" {
					if err := s.check("/", "Sys.Console"); err != nil {
						return err
					}
				}
			default:
				sid, _, _ := strings.Cut(file, ":")
				if st := params["storage"]; st != "" {
					sid = st
				}
				if err := s.check("/storage/"+sid, "Datastore.AllocateSpace"); err != nil {
					return err
				}
			}
		}
		return s.bridgeAccess(src.conf)
	case "PUT /nodes/{node}/qemu/{vmid}/config", "POST /nodes/{node}/qemu/{vmid}/config":
		return s.configChecks(params)
	case "DELETE /nodes/{node}/storage/{storage}/content/{volume}":
		sid := params["storage"]
		if s2, _, ok := strings.Cut(params["volume"], ":"); ok {
			sid = s2
		}
		return s.check("/storage/"+sid, "Datastore.Allocate")
	case "GET /nodes/{node}/tasks/{upid}/status", "GET /nodes/{node}/tasks/{upid}/log":
		if t := s.tasks[params["upid"]]; t != nil && t.user != s.opts.TokenID {
			return s.check("/nodes/"+params["node"], "Sys.Audit")
		}
	}
	return nil
}

// configChecks are update_vm's (qemu-server src/PVE/API2/Qemu.pm).
func (s *Server) configChecks(params map[string]string) *apiError {
	vmid := params["vmid"]
	vmPath := "/vms/" + vmid
	if params["skiplock"] != "" {
		return &apiError{status: 400, msg: "Parameter verification failed.", params: map[string]string{"skiplock": "Only root may use this option."}}
	}
	keys := []string{}
	for k := range params {
		switch k {
		case "node", "vmid", "digest", "delete", "revert", "force", "skiplock", "background_delay":
			continue
		}
		keys = append(keys, k)
	}
	keys = append(keys, splitList(params["delete"])...)
	slices.Sort(keys)
	// check_vm_modify_config_perm
	for _, k := range keys {
		switch {
		case driveRE.MatchString(k), k == "cdrom", k == "tags", valuePermRE.MatchString(k):
			continue
		case strings.HasPrefix(k, "numa") && k != "numa":
			if err := s.check(vmPath, "VM.Config.CPU"); err != nil {
				return err
			}
		case netRE.MatchString(k):
			if err := s.check(vmPath, "VM.Config.Network"); err != nil {
				return err
			}
		case ipconfigRE.MatchString(k), configPrivOf[k] == "cloudinit":
			if err := s.checkAny(vmPath, "VM.Config.Cloudinit", "VM.Config.Network"); err != nil {
				return err
			}
		case configPrivOf[k] != "":
			if err := s.check(vmPath, configPrivOf[k]); err != nil {
				return err
			}
			if k == "startup" {
				if err := s.check("/", "Sys.Modify"); err != nil {
					return err
				}
			}
		default:
			return fail(500, "only root can set '%s' config", k)
		}
	}
	// The per-option checks of the update: drives, NICs, tags.
	for _, k := range keys {
		v, set := params[k]
		switch {
		case driveRE.MatchString(k) && set:
			file, opts := splitDrive(v)
			if opts["media"] == "cdrom" {
				if err := s.check(vmPath, "VM.Config.CDROM"); err != nil {
					return err
				}
			} else if err := s.check(vmPath, "VM.Config.Disk"); err != nil {
				return err
			}
			if err := s.volumeAccess(file, opts["media"] == "cdrom"); err != nil {
				return err
			}
		case netRE.MatchString(k) && set:
			if err := s.bridgeAccess(map[string]string{k: v}); err != nil {
				return err
			}
		case k == "tags":
			if err := s.check(vmPath, "VM.Config.Options"); err != nil {
				return err
			}
		}
	}
	return nil
}

// volumeAccess is $check_storage_access's part for an existing volume:
// pve-storage src/PVE/Storage.pm check_volume_access. An ISO needs
// Datastore.Allocate, or Datastore.AllocateSpace or Datastore.Audit, on
// its storage; a physical CD-ROM needs Sys.Console on /.
func (s *Server) volumeAccess(file string, cdrom bool) *apiError {
	switch {
	case file == "" || file == "none" || file == "cloudinit":
		return nil
	case cdrom && file == "cdrom":
		return s.check("/", "Sys.Console")
	}
	sid, rel, ok := strings.Cut(file, ":")
	if !ok {
		return fail(500, "Only root can pass arbitrary filesystem paths.")
	}
	if s.can("/storage/"+sid, "Datastore.Allocate") {
		return nil
	}
	if strings.HasPrefix(rel, "iso/") || strings.HasPrefix(rel, "vztmpl/") || strings.HasPrefix(rel, "import/") {
		return s.checkAny("/storage/"+sid, "Datastore.AllocateSpace", "Datastore.Audit")
	}
	return fail(500, "missing privileges to access %s", file)
}

// bridgeAccess is qemu-server check_bridge_access → pve-guest-common
// check_vnet_access for the NICs in conf, without SDN (zone localnetwork).
func (s *Server) bridgeAccess(conf map[string]string) *apiError {
	for _, k := range sortedKeys(conf) {
		if !netRE.MatchString(k) {
			continue
		}
		_, opts := splitDrive(conf[k])
		bridge := opts["bridge"]
		if bridge == "" {
			continue
		}
		path := "/sdn/zones/localnetwork/" + bridge
		if tag := opts["tag"]; tag != "" {
			path += "/" + tag
		}
		if err := s.check(path, "SDN.Use"); err != nil {
			return err
		}
	}
	return nil
}

// splitDrive splits a property string ("local:iso/a.iso,media=cdrom") into
// its bare first value and its key=value options.
func splitDrive(v string) (string, map[string]string) {
	opts := map[string]string{}
	first := ""
	for i, part := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(part, "=")
		switch {
		case ok:
			opts[k] = val
		case i == 0:
			first = part
		}
	}
	if first == "" {
		first = opts["file"]
	}
	return first, opts
}

// visible filters what a listing returns by what the token may see:
// /cluster/resources (pve-manager API2/Cluster.pm resources: VM.Audit on
// /vms/<vmid>, Datastore.Audit on /storage/<id>; a node without
// Sys.Audit is listed with its statistics only), a node's VM list
// (qemu-server API2/Qemu.pm vmlist: VM.Audit), a node's storages
// (pve-storage API2/Storage/Status.pm index: Datastore.Audit or
// Datastore.AllocateSpace) and a storage's content (Content.pm index:
// check_volume_access per volume). Caller holds s.mu.
func (s *Server) visible(ep *endpoint, data any) any {
	items, ok := data.([]map[string]any)
	if ep == nil || !ok {
		return data
	}
	var keep func(m map[string]any) bool
	switch ep.Method + " " + ep.Path {
	case "GET /cluster/resources":
		keep = func(m map[string]any) bool {
			switch m["type"] {
			case "qemu", "lxc":
				return s.can(fmt.Sprintf("/vms/%v", m["vmid"]), "VM.Audit")
			case "storage":
				return s.can(fmt.Sprintf("/storage/%v", m["storage"]), "Datastore.Audit")
			case "node":
				if !s.can(fmt.Sprintf("/nodes/%v", m["node"]), "Sys.Audit") {
					for _, k := range []string{"maxcpu", "maxmem", "cpu", "mem", "disk", "maxdisk", "uptime"} {
						delete(m, k)
					}
				}
			}
			return true
		}
	case "GET /nodes/{node}/qemu":
		keep = func(m map[string]any) bool { return s.can(fmt.Sprintf("/vms/%v", m["vmid"]), "VM.Audit") }
	case "GET /nodes/{node}/storage":
		keep = func(m map[string]any) bool {
			return s.checkAny(fmt.Sprintf("/storage/%v", m["storage"]), "Datastore.Audit", "Datastore.AllocateSpace") == nil
		}
	case "GET /nodes/{node}/storage/{storage}/content":
		keep = func(m map[string]any) bool {
			volid := fmt.Sprint(m["volid"])
			return s.volumeAccess(volid, false) == nil || s.ownedVolumeAccess(volid)
		}
	default:
		return data
	}
	out := []map[string]any{}
	for _, m := range items {
		if keep(m) {
			out = append(out, m)
		}
	}
	return out
}

// ownedVolumeAccess is check_volume_access's rule for a VM's disk image:
// Datastore.Audit on the storage and VM.Config.Disk on the owner VM.
func (s *Server) ownedVolumeAccess(volid string) bool {
	sid, rel, _ := strings.Cut(volid, ":")
	m := ownerRE.FindStringSubmatch(rel)
	if m == nil {
		return false
	}
	return s.can("/storage/"+sid, "Datastore.Audit") && s.can("/vms/"+m[1], "VM.Config.Disk")
}
