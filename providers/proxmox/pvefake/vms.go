package pvefake

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// vm is one QEMU guest: its config file as key/value pairs, and the
// runtime state that is not in the config.
type vm struct {
	vmid int
	node string
	conf map[string]string
	// pool is the resource pool the VM is in (user.cfg), "" for none.
	pool   string
	status string // running, stopped
	qmp    string // qmpstatus when running; "" means running
	// agent is what the guest agent reports; nil until the guest booted.
	agent []map[string]any
	// agentHung is how the agent hangs (HangAgent), hungNot by default.
	agentHung int
}

func (v *vm) locked() string { return v.conf["lock"] }

// name is the VM's name as PVE reports it: the config's, or "VM <vmid>"
// for a VM without one, such as a clone whose temporary config holds only
// its lock (qemu-server src/PVE/QemuServer.pm vmstatus:
// `$conf->{name} || "VM $vmid"`, PVE 8.4 and 9.1).
func (v *vm) name() string {
	if n := v.conf["name"]; n != "" {
		return n
	}
	return fmt.Sprintf("VM %d", v.vmid)
}

func (v *vm) resource(hideName bool) map[string]any {
	r := map[string]any{"id": fmt.Sprintf("qemu/%d", v.vmid), "type": "qemu", "vmid": v.vmid, "node": v.node,
		"status": v.status, "template": b2i(v.conf["template"] == "1"), "maxcpu": atoiOr(v.conf["cores"], 1),
		"maxmem": atoiOr(v.conf["memory"], 512) << 20, "maxdisk": 2 << 30}
	if !hideName || v.conf["template"] == "1" {
		// pve-manager PVE/API2/Cluster.pm resources takes the name from
		// pvestatd's RRD data (PVE/API2Tools.pm extract_vm_stats), which
		// pvestatd fills from qemu-server's vmstatus: a VM without a
		// name in its config is "VM <vmid>" there too.
		r["name"] = v.name()
	} else {
		// Before pvestatd's first update of a new VMID there is no RRD
		// entry: extract_vm_stats lists it with status "unknown" and no
		// name, uptime, template or sizes; lock and tags come from the
		// config at once (get_guest_config_properties).
		for _, k := range []string{"maxcpu", "maxmem", "maxdisk", "template"} {
			delete(r, k)
		}
		r["status"] = "unknown"
	}
	if t := v.conf["tags"]; t != "" {
		r["tags"] = t
	}
	if v.pool != "" {
		// pve-manager API2/Cluster.pm resources: the pool from user.cfg.
		r["pool"] = v.pool
	}
	if l := v.locked(); l != "" {
		// PVE 7.3+ lists the lock (and tags) with each guest.
		r["lock"] = l
	}
	if v.status == "running" {
		r["uptime"] = 60
	}
	return r
}

func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}

// digest is the config's SHA-1, as PVE returns it for optimistic locking.
func (v *vm) digest() string {
	keys := make([]string, 0, len(v.conf))
	for k := range v.conf {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha1.New()
	for _, k := range keys {
		_, _ = fmt.Fprintf(h, "%s: %s\n", k, v.conf[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (s *Server) listVMs(node string) []map[string]any {
	out := []map[string]any{}
	for _, id := range s.sortedVMIDs() {
		v := s.vms[id]
		if v.node != node {
			continue
		}
		r := v.resource(false)
		delete(r, "id")
		delete(r, "type")
		delete(r, "node")
		out = append(out, r)
	}
	return out
}

// vmOn returns the VM vmid on node, or PVE's "does not exist" error: the
// config lives under the node it runs on.
func (s *Server) vmOn(node, vmidStr string) (*vm, *apiError) {
	vmid, _ := strconv.Atoi(vmidStr) // the schema checked it (pve-vmid)
	v, ok := s.vms[vmid]
	if !ok || v.node != node {
		return nil, notExist(node, vmid)
	}
	return v, nil
}

func (s *Server) routeVM(req *request, get, post, put, del bool) (any, func(), *apiError, bool) {
	p := req.path
	if len(p) < 4 || p[0] != "nodes" || p[2] != "qemu" {
		return nil, nil, nil, false
	}
	node := p[1]
	v, err := s.vmOn(node, p[3])
	if err != nil {
		return nil, nil, err, true
	}
	rest := p[4:]
	switch {
	case del && len(rest) == 0:
		d, err := s.destroy(req, v)
		return d, nil, err, true
	case get && eq(rest, "config"):
		out := map[string]any{"digest": v.digest()}
		for k, val := range v.conf {
			out[k] = val
		}
		return out, nil, nil, true
	case (put || post) && eq(rest, "config"):
		err := s.setConfig(req, v)
		if err != nil || put {
			return nil, nil, err, true
		}
		// POST is the asynchronous variant: a qmconfig task.
		t := s.newTask(node, "qmconfig", strconv.Itoa(v.vmid), req.user)
		s.finish(t, "OK", nil)
		return t.upid, nil, nil, true
	case get && eq(rest, "status", "current"):
		return s.current(v), nil, nil, true
	case post && len(rest) == 2 && rest[0] == "status":
		d, err := s.power(req, v, rest[1])
		return d, nil, err, true
	case post && eq(rest, "clone"):
		return s.clone(req, v)
	case get && eq(rest, "agent", "network-get-interfaces"):
		d, err := s.agentIfaces(v)
		return d, nil, err, true
	}
	return nil, nil, fail(501, "Method '%s /%s' not implemented", req.method, strings.Join(p, "/")), true
}

func (s *Server) current(v *vm) map[string]any {
	out := map[string]any{"vmid": v.vmid, "status": v.status, "cpus": atoiOr(v.conf["cores"], 1),
		"maxmem": atoiOr(v.conf["memory"], 512) << 20, "maxdisk": 2 << 30, "ha": map[string]any{"managed": 0}}
	out["name"] = v.name()
	if t := v.conf["tags"]; t != "" {
		out["tags"] = t
	}
	if l := v.locked(); l != "" {
		out["lock"] = l
	}
	if v.conf["agent"] != "" && v.conf["agent"] != "0" {
		out["agent"] = 1
	}
	if v.conf["template"] == "1" {
		out["template"] = 1
	}
	if v.status == "running" {
		out["qmpstatus"] = "running"
		if v.qmp != "" {
			out["qmpstatus"] = v.qmp
		}
		out["pid"] = 4000 + v.vmid
		out["uptime"] = 60
		out["running-machine"] = "pc-i440fx-8.1+pve0"
		out["running-qemu"] = "8.1.5"
	} else {
		out["qmpstatus"] = "stopped"
	}
	return out
}

// setConfig is PUT/POST /nodes/{node}/qemu/{vmid}/config.
func (s *Server) setConfig(req *request, v *vm) *apiError {
	// The schema checked every parameter (admit).
	changes := map[string]string{}
	for k := range req.params {
		changes[k] = req.params.Get(k)
	}
	if d, ok := changes["digest"]; ok && d != v.digest() {
		return fail(500, "detected modified configuration - file changed by other user? Try again.")
	}
	if l := v.locked(); l != "" && changes["skiplock"] != "1" {
		return fail(500, "VM is locked (%s)", l)
	}
	// qemu-server update_vm_api: tags set are checked against the old
	// ones, tags deleted against none (assert_tag_permissions), then
	// stored by get_unique_tags. PVE checks option by option, writing
	// each to the pending section, so a refused tag can leave the
	// options before it pending; the fake refuses the whole call.
	if t, ok := changes["tags"]; ok {
		if err := s.assertTagPermissions(req.user, v.conf["tags"], t); err != nil {
			return err
		}
		changes["tags"] = s.uniqueTags(t)
	}
	deleted := splitList(changes["delete"])
	for _, d := range deleted {
		// qemu-server API2/Qemu.pm update_vm, before any change (its
		// quotes as they are).
		if _, set := changes[d]; set {
			return paramErr("delete", fmt.Sprintf("you can't use '-%s' and -delete %s' at the same time", d, d))
		}
	}
	if slices.Contains(deleted, "tags") {
		if err := s.assertTagPermissions(req.user, v.conf["tags"], ""); err != nil {
			return err
		}
	}
	for k, val := range changes {
		switch k {
		case "digest", "skiplock", "background_delay":
		case "delete":
			// A key not set is a warning in PVE ("cannot delete '…' - not
			// set in current configuration!"), not an error.
			for _, d := range deleted {
				delete(v.conf, d)
			}
		default:
			v.conf[k] = val
		}
	}
	return nil
}

// power is POST status/{start,stop,shutdown}: a task each.
func (s *Server) power(req *request, v *vm, action string) (any, *apiError) {
	typ := map[string]string{"start": "qmstart", "stop": "qmstop", "shutdown": "qmshutdown"}[action]
	if typ == "" {
		return nil, fail(501, "Method 'POST /nodes/%s/qemu/%d/status/%s' not implemented", v.node, v.vmid, action)
	}
	if v.conf["template"] == "1" && action == "start" {
		return nil, fail(500, "you can't start a vm if it's a template")
	}
	if l := v.locked(); l != "" && req.params.Get("skiplock") != "1" {
		return nil, fail(500, "VM is locked (%s)", l)
	}
	if action == "start" && v.status == "running" {
		return nil, fail(500, "VM %d already running", v.vmid)
	}
	t := s.newTask(v.node, typ, strconv.Itoa(v.vmid), req.user)
	s.finish(t, "OK", func() {
		if action == "start" {
			v.status, v.qmp = "running", ""
		} else {
			v.stop()
		}
	})
	return t.upid, nil
}

// stop is what a qmstop task leaves: the VM stopped, QEMU and its guest
// agent gone.
func (v *vm) stop() { v.status, v.qmp, v.agent = "stopped", "", nil }

// clone is POST /nodes/{node}/qemu/{vmid}/clone.
func (s *Server) clone(req *request, src *vm) (any, func(), *apiError, bool) {
	// The schema checked newid, name and every other parameter (admit).
	newid, _ := strconv.Atoi(req.params.Get("newid"))
	name := req.params.Get("name")
	// The checks in the order of clone_vm's $load_and_check, which runs
	// before the worker forks: its errors are the request's own answer
	// (qemu-server src/PVE/API2/Qemu.pm clone_vm, PVE 8.4 and 9.1).
	s.clones = append(s.clones, cloneRequest(req, src))
	pool := req.params.Get("pool")
	if pool != "" && !slices.Contains(s.opts.Pools, pool) {
		// First in $load_and_check: RPCEnvironment check_pool_exist,
		// raise_perm_exc (pve-common Exception.pm).
		return nil, nil, fail(403, "Permission check failed (pool '%s' does not exist)", pool), true
	}
	target := req.params.Get("target")
	if target == src.node {
		target = "" // "if ($target eq $localnode) { undef $target }"
	}
	if target != "" && !s.isNode(target) {
		return nil, nil, fail(500, "no such cluster node '%s'", target), true // PVE::Cluster::check_node_exists
	}
	storageName := req.params.Get("storage")
	if storageName != "" {
		spec, ok := s.storageSpec(storageName)
		switch {
		case !ok:
			return nil, nil, fail(500, "storage '%s' does not exist", storageName), true // PVE::Storage::storage_config
		case !slices.Contains(spec.Content, "images"):
			return nil, nil, paramErr("storage", fmt.Sprintf("storage '%s' does not support vm images", storageName)), true
		case target != "" && !spec.Shared:
			return nil, nil, fail(500, "can't clone to non-shared storage '%s'", storageName), true
		}
	}
	if l := src.locked(); l != "" {
		return nil, nil, fail(500, "VM is locked (%s)", l), true // PVE::AbstractConfig::check_lock
	}
	// full defaults to "not a template": a clone of a VM is always full.
	full := src.conf["template"] != "1"
	if f := req.params.Get("full"); f != "" {
		full = f == "1" || f == "true"
	}
	if storageName != "" && !full {
		return nil, nil, fail(500, "parameter 'storage' not allowed for linked clones"), true
	}
	if req.params.Get("format") != "" && !full {
		// qemu-server API2/Qemu.pm clone_vm, $load_and_check.
		return nil, nil, fail(500, "parameter 'format' not allowed for linked clones"), true
	}
	if target != "" && !s.sharedVM(src) {
		// $check_storage_access_clone: any disk or CD-ROM volume on a
		// storage without `shared` makes the VM local, whether the clone
		// is full or linked.
		return nil, nil, fail(500, "can't clone VM to node '%s' (VM uses local storage)", target), true
	}
	if ct, used := s.cts[newid]; used {
		// qemu-server API2/Qemu.pm clone_vm calls
		// PVE::Cluster::check_vmid_unused, which refuses a VMID any guest
		// of the cluster has, a container's too ("CT <vmid> already exists
		// on node '<node>'").
		return nil, nil, fail(500, "CT %d already exists on node '%s'", newid, ct.node), true
	}
	if other, used := s.vms[newid]; used && other.node == src.node {
		// `-f $conffile`: the config path of the node serving the call.
		return nil, nil, fail(500, "unable to create VM %d: config file already exists", newid), true
	}
	dest := src.node
	if target != "" {
		dest = target
	}
	t := s.newTask(src.node, "qmclone", strconv.Itoa(src.vmid), req.user)
	if _, used := s.vms[newid]; used {
		// The VMID is taken on another node: the worker's write of the
		// temporary config fails in pmxcfs (pve-cluster src/pmxcfs/memdb.c
		// memdb_rename: -EEXIST when a different VM has the VMID), raised
		// by PVE::File::file_set_contents outside clone_vm's eval, so
		// without the "clone failed: " prefix.
		s.finish(t, fmt.Sprintf("close (rename) atomic file '/etc/pve/nodes/%s/qemu-server/%d.conf' failed: File exists", src.node, newid), nil)
		return t.upid, nil, nil, true
	}
	// The temporary config the worker writes first ("# qmclone temporary
	// file\nlock: clone\n") on the node serving the call; it is renamed
	// to the target node only when the clone is done.
	nv := &vm{vmid: newid, node: src.node, status: "stopped", conf: map[string]string{"lock": "clone"}}
	s.vms[newid] = nv
	t.log = append(t.log, fmt.Sprintf("create %s clone of drive scsi0 (%s)", map[bool]string{true: "full", false: "linked"}[full], src.conf["scsi0"]))
	final := map[string]string{}
	for k, val := range src.conf {
		if k != "template" && k != "lock" {
			final[k] = val
		}
	}
	final["name"] = name
	if name == "" {
		final["name"] = "Copy-of-VM-" + src.conf["name"]
	}
	if d := req.params.Get("description"); d != "" {
		final["description"] = d
	}
	// A full clone's disk lands on the storage asked for, else on the
	// source disk's (PVE::QemuServer::clone_disk); a linked clone's on the
	// base volume's storage, named <base>/<new>.
	srcStorage, srcVolume, _ := strings.Cut(strings.SplitN(src.conf["scsi0"], ",", 2)[0], ":")
	disk := storageName
	if disk == "" {
		disk = srcStorage
	}
	final["scsi0"] = fmt.Sprintf("%s:vm-%d-disk-0,size=2G", disk, newid)
	if !full {
		final["scsi0"] = fmt.Sprintf("%s:%s/vm-%d-disk-0,size=2G", srcStorage, srcVolume, newid)
	}
	for k, val := range final {
		if m := netIndexRE.FindStringSubmatch(k); m != nil {
			// "always change MAC! address": each NIC of the source, its
			// model and options kept; none added (qemu-server
			// API2/Qemu.pm clone_vm). PVE draws the MAC at random under
			// datacenter.cfg's mac_prefix (BC:24:11 by default since PVE
			// 8.1); the fake derives it from the VMID and the index.
			n, _ := strconv.Atoi(m[1])
			final[k] = withMAC(val, fmt.Sprintf("BC:24:11:%02X:%02X:%02X", (newid>>16)&0x0f|(n&0x0f)<<4, (newid>>8)&0xff, newid&0xff))
		}
	}
	final["meta"] = fmt.Sprintf("creation-qemu=8.1.5,ctime=%d", time.Now().Unix())
	final["smbios1"] = fmt.Sprintf("uuid=6f1e0a3e-8d0b-4c55-9a43-%012x", newid)
	if s.disksCopied {
		// clone_vm writes the full config, still `lock: clone`, after each
		// disk: a task held now is past its disk copies.
		nv.conf = maps.Clone(final)
		nv.conf["lock"] = "clone"
	}
	s.finish(t, "OK", func() { nv.conf, nv.node, nv.pool = final, dest, pool }, func(exit string) {
		// A failed clone removes what it made (qemu-server's clone worker).
		if s.vms[newid] == nv {
			delete(s.vms, newid)
		}
		t.log = append(t.log, "TASK ERROR: "+exit)
	})
	var after func()
	if s.dropNext {
		s.dropNext = false
		// The clone completes; only its answer is lost.
		after = func() { <-t.completed }
	}
	return t.upid, after, nil, true
}

var netIndexRE = regexp.MustCompile(`^net(\d+)$`)

// withMAC is a NIC's property string with its MAC replaced: the value of
// the "<model>=" first part (print_net) or of macaddr=.
func withMAC(net, mac string) string {
	parts := strings.Split(net, ",")
	for i, p := range parts {
		k, _, ok := strings.Cut(p, "=")
		if ok && (i == 0 || k == "macaddr") {
			parts[i] = k + "=" + mac
		}
	}
	return strings.Join(parts, ",")
}

// storageSpec is the cluster's storage of that name.
func (s *Server) storageSpec(name string) (StorageSpec, bool) {
	for _, spec := range s.opts.Storages {
		if spec.Name == name {
			return spec, true
		}
	}
	return StorageSpec{}, false
}

// sharedVM is qemu-server's $check_storage_access_clone verdict: false
// when any volume the config names (a disk or an ISO in a CD-ROM drive;
// not "none" or the host's "cdrom") is on a storage that is not shared.
func (s *Server) sharedVM(v *vm) bool {
	for k, val := range v.conf {
		if !driveRE.MatchString(k) {
			continue
		}
		volid, _, _ := strings.Cut(val, ",")
		sid, _, ok := strings.Cut(volid, ":")
		if !ok || volid == "none" || volid == "cdrom" {
			continue
		}
		if spec, known := s.storageSpec(sid); !known || !spec.Shared {
			return false
		}
	}
	return true
}

// destroy is DELETE /nodes/{node}/qemu/{vmid}: the config becomes
// `lock: destroyed` while the qmdestroy task removes the disks.
func (s *Server) destroy(req *request, v *vm) (any, *apiError) {
	// qemu-server API2/Qemu.pm destroy_vm: skiplock is root@pam's only;
	// the early checks (protection, running) answer the request; the
	// lock is checked in the worker (QemuServer.pm destroy_vm,
	// check_lock), so a locked VM fails the qmdestroy task.
	if req.params.Get("skiplock") == "1" && req.user != "root@pam" {
		return nil, paramErr("skiplock", "Only root may use this option.")
	}
	if v.conf["protection"] == "1" {
		// PVE::AbstractConfig::check_protection, for any VM.
		return nil, fail(500, "can't remove VM %d - protection mode enabled", v.vmid)
	}
	if v.status == "running" {
		return nil, fail(500, "VM %d is running - destroy failed", v.vmid)
	}
	if l := v.locked(); l != "" && req.params.Get("skiplock") != "1" {
		t := s.newTask(v.node, "qmdestroy", strconv.Itoa(v.vmid), req.user)
		s.finish(t, fmt.Sprintf("VM is locked (%s)", l), nil)
		return t.upid, nil
	}
	if req.params.Get("destroy-unreferenced-disks") == "1" {
		// destroy_vm frees the VM's own disks (each in an eval), then,
		// with purge_unreferenced, lists the VMID's disks on every enabled
		// storage (PVE::Storage::vdisk_list($storecfg, undef, $vmid, undef,
		// 'images')) outside any eval; an offline storage fails the task
		// there, before the config is replaced or removed (QemuServer.pm
		// destroy_vm). The fake keeps the config as it was.
		for _, spec := range s.opts.Storages {
			if spec.Offline && slices.Contains(spec.Content, "images") {
				t := s.newTask(v.node, "qmdestroy", strconv.Itoa(v.vmid), req.user)
				s.finish(t, notOnline(spec.Name).msg, nil)
				return t.upid, nil
			}
		}
	}
	return s.startDestroy(v, req.user).upid, nil
}

// startDestroy runs the qmdestroy worker. PVE frees the VM's own disks
// first (not CD-ROM images: the seed ISO stays), with the config still in
// place under the config file lock, then writes `lock: destroyed` as the
// whole config and removes it last (QemuServer.pm destroy_vm, "only now
// remove the zombie config, else we can have reuse race"). The fake
// collapses the disk phase: the config is `lock: destroyed` while the task
// runs.
func (s *Server) startDestroy(v *vm, user string) *task {
	v.conf = map[string]string{"lock": "destroyed"}
	t := s.newTask(v.node, "qmdestroy", strconv.Itoa(v.vmid), user)
	s.finish(t, "OK", func() {
		if s.vms[v.vmid] == v {
			delete(s.vms, v.vmid)
		}
	})
	return t
}

// agentIfaces is GET agent/network-get-interfaces, in the order of
// qemu-server's assert_agent_available (src/PVE/QemuServer/Agent.pm; PVE
// 8.4 the same checks in the same file): no `agent` key at all (an
// `agent: 0` is defined and passes), then the VM not running, then
// guest-ping failing within 3 s (qga_check_running) — no agent in the
// guest, a guest not booted yet, a paused VM, a disabled agent. An agent
// that answers the ping and then not the command within QMPClient's
// default 5 s fails the command (src/PVE/QMPClient.pm cmd, mux_timeout).
func (s *Server) agentIfaces(v *vm) (any, *apiError) {
	agent, configured := v.conf["agent"]
	switch {
	case !configured:
		return nil, fail(500, "No QEMU guest agent configured")
	case v.status != "running":
		return nil, fail(500, "VM %d is not running", v.vmid)
	case agent == "0" || strings.HasPrefix(agent, "enabled=0") || strings.HasPrefix(agent, "0,") || v.agent == nil || (v.qmp != "" && v.qmp != "running") || v.agentHung == hungPing:
		return nil, fail(500, "QEMU guest agent is not running")
	case v.agentHung == hungCommand:
		// PVE 8.4 names the peer "qmp" for every command; 9.x names a
		// guest agent peer "qga" (QMPClient.pm cmd: "$peer->{name}
		// $peer->{type} command …").
		return nil, fail(500, "VM %d qmp command 'guest-network-get-interfaces' failed - got timeout", v.vmid)
	}
	return map[string]any{"result": v.agent}, nil
}

// How the guest agent hangs (HangAgent).
const (
	hungNot     = 0
	hungPing    = 1 // guest-ping gets no answer within its 3 s
	hungCommand = 2 // guest-ping answers, the command times out after 5 s
)

var _ = http.MethodGet
