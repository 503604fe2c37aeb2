package pvefake

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// vm is one QEMU guest: its config file as key/value pairs, and the
// runtime state that is not in the config.
type vm struct {
	vmid   int
	node   string
	conf   map[string]string
	status string // running, stopped
	qmp    string // qmpstatus when running; "" means running
	// agent is what the guest agent reports; nil until the guest booted.
	agent []map[string]any
}

func (v *vm) locked() string { return v.conf["lock"] }

func (v *vm) resource(hideName bool) map[string]any {
	r := map[string]any{"id": fmt.Sprintf("qemu/%d", v.vmid), "type": "qemu", "vmid": v.vmid, "node": v.node,
		"status": v.status, "template": b2i(v.conf["template"] == "1"), "maxcpu": atoiOr(v.conf["cores"], 1),
		"maxmem": atoiOr(v.conf["memory"], 512) << 20, "maxdisk": 2 << 30}
	if n := v.conf["name"]; n != "" && (!hideName || v.conf["template"] == "1") {
		r["name"] = n
	}
	if t := v.conf["tags"]; t != "" {
		r["tags"] = t
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
	vmid, err := strconv.Atoi(vmidStr)
	if err != nil || vmid < 100 {
		return nil, paramErr("vmid", fmt.Sprintf("type check ('integer') failed - got '%s'", vmidStr))
	}
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
	if n := v.conf["name"]; n != "" {
		out["name"] = n
	}
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

// configKeys are the config keys the fake's schema knows; anything else is
// rejected as PVE's schema rejects it.
var configKeys = map[string]bool{
	"name": true, "description": true, "tags": true, "cores": true, "sockets": true, "memory": true,
	"ide0": true, "ide1": true, "ide2": true, "ide3": true, "sata0": true, "scsi0": true, "net0": true,
	"agent": true, "onboot": true, "boot": true, "ostype": true, "cpu": true, "delete": true, "digest": true,
	"skiplock": true, "background_delay": true, "serial0": true, "vga": true,
}

var (
	// tagRE is pve-common's pve-tag format.
	tagRE = regexp.MustCompile(`^(?i)[a-z0-9_][a-z0-9_\-+.]*$`)
	// dnsNameRE is the dns-name format PVE checks VM names with.
	dnsNameRE = regexp.MustCompile(`^(?i)([a-z0-9]([a-z0-9\-]*[a-z0-9])?)(\.([a-z0-9]([a-z0-9\-]*[a-z0-9])?))*$`)
)

// setConfig is PUT/POST /nodes/{node}/qemu/{vmid}/config.
func (s *Server) setConfig(req *request, v *vm) *apiError {
	for k := range req.params {
		if !configKeys[k] {
			return paramErr(k, "property is not defined in schema and the schema does not allow additional properties")
		}
	}
	changes := map[string]string{}
	for k := range req.params {
		changes[k] = req.params.Get(k)
	}
	if c, ok := changes["cores"]; ok {
		if n, err := strconv.Atoi(c); err != nil {
			return paramErr("cores", fmt.Sprintf("type check ('integer') failed - got '%s'", c))
		} else if n < 1 {
			return paramErr("cores", "value must have a minimum value of 1")
		}
	}
	if m, ok := changes["memory"]; ok {
		if n, err := strconv.Atoi(strings.TrimPrefix(m, "current=")); err != nil || n < 16 {
			return paramErr("memory", "invalid format - value must have a minimum value of 16")
		}
	}
	if n, ok := changes["name"]; ok && !dnsNameRE.MatchString(n) {
		return paramErr("name", "invalid format - value does not look like a valid DNS name")
	}
	if t, ok := changes["tags"]; ok {
		norm, err := normalizeTags(t)
		if err != nil {
			return err
		}
		changes["tags"] = norm
	}
	if d, ok := changes["digest"]; ok && d != v.digest() {
		return fail(500, "detected modified configuration - file changed by other user? Try again.")
	}
	if l := v.locked(); l != "" && changes["skiplock"] != "1" {
		return fail(500, "VM is locked (%s)", l)
	}
	for k, val := range changes {
		switch k {
		case "digest", "skiplock", "background_delay":
		case "delete":
			for _, d := range strings.Split(val, ",") {
				delete(v.conf, strings.TrimSpace(d))
			}
		default:
			v.conf[k] = val
		}
	}
	return nil
}

// normalizeTags checks a pve-tag-list and stores it as PVE does: unique,
// sorted, ';'-separated.
func normalizeTags(list string) (string, *apiError) {
	seen := map[string]bool{}
	var tags []string
	for _, t := range strings.FieldsFunc(list, func(r rune) bool { return r == ';' || r == ',' || r == ' ' }) {
		if !tagRE.MatchString(t) {
			return "", paramErr("tags", fmt.Sprintf("invalid format - invalid characters in tag '%s'", t))
		}
		if !seen[strings.ToLower(t)] {
			seen[strings.ToLower(t)] = true
			tags = append(tags, t)
		}
	}
	sort.Slice(tags, func(i, j int) bool { return strings.ToLower(tags[i]) < strings.ToLower(tags[j]) })
	return strings.Join(tags, ";"), nil
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
			v.status, v.qmp, v.agent = "stopped", "", nil
		}
	})
	return t.upid, nil
}

// clone is POST /nodes/{node}/qemu/{vmid}/clone.
func (s *Server) clone(req *request, src *vm) (any, func(), *apiError, bool) {
	known := map[string]bool{"newid": true, "name": true, "description": true, "full": true, "storage": true,
		"target": true, "pool": true, "format": true, "bwlimit": true, "snapname": true}
	for k := range req.params {
		if !known[k] {
			return nil, nil, paramErr(k, "property is not defined in schema and the schema does not allow additional properties"), true
		}
	}
	newStr := req.params.Get("newid")
	if newStr == "" {
		return nil, nil, paramErr("newid", "property is missing and it is not optional"), true
	}
	newid, err := strconv.Atoi(newStr)
	switch {
	case err != nil:
		return nil, nil, paramErr("newid", fmt.Sprintf("type check ('integer') failed - got '%s'", newStr)), true
	case newid < 100:
		return nil, nil, paramErr("newid", "value must have a minimum value of 100"), true
	case newid > 999999999:
		return nil, nil, paramErr("newid", "value must have a maximum value of 999999999"), true
	}
	name := req.params.Get("name")
	if name != "" && !dnsNameRE.MatchString(name) {
		return nil, nil, paramErr("name", "invalid format - value does not look like a valid DNS name"), true
	}
	full := req.params.Get("full") == "1" || req.params.Get("full") == "true"
	if src.conf["template"] != "1" {
		full = true // PVE: a clone of a non-template is always full
	}
	storageName := req.params.Get("storage")
	if storageName != "" && !full {
		return nil, nil, fail(500, "parameter 'storage' not allowed for linked clones"), true
	}
	target := src.node
	if t := req.params.Get("target"); t != "" {
		if !s.isNode(t) {
			return nil, nil, fail(500, "no such cluster node '%s'", t), true
		}
		target = t
	}
	if storageName != "" {
		if _, ok := s.storageOn(target, storageName); !ok {
			return nil, nil, fail(500, "storage '%s' does not exist", storageName), true
		}
	}
	if l := src.locked(); l != "" && src.conf["template"] != "1" {
		return nil, nil, fail(500, "VM is locked (%s)", l), true
	}
	if other, used := s.vms[newid]; used {
		if other.node == target {
			// qemu-server's clone checks the config file on the target first.
			return nil, nil, fail(500, "unable to create VM %d: config file already exists", newid), true
		}
		// Assumed: elsewhere in the cluster, PVE::Cluster::check_vmid_unused.
		return nil, nil, fail(500, "VM %d already exists on node '%s'", newid, other.node), true
	}
	// The temporary config PVE writes first: only the lock.
	nv := &vm{vmid: newid, node: target, status: "stopped", conf: map[string]string{"lock": "clone"}}
	s.vms[newid] = nv
	t := s.newTask(src.node, "qmclone", strconv.Itoa(src.vmid), req.user)
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
	disk := storageName
	if disk == "" {
		disk = "local-lvm"
	}
	final["scsi0"] = fmt.Sprintf("%s:vm-%d-disk-0,size=2G", disk, newid)
	if !full {
		final["scsi0"] = fmt.Sprintf("local-lvm:base-%d-disk-0/vm-%d-disk-0,size=2G", src.vmid, newid)
	}
	final["net0"] = fmt.Sprintf("virtio=BC:24:11:%02X:%02X:%02X,bridge=vmbr0", (newid>>16)&0xff, (newid>>8)&0xff, newid&0xff)
	final["meta"] = fmt.Sprintf("creation-qemu=8.1.5,ctime=%d", time.Now().Unix())
	final["smbios1"] = fmt.Sprintf("uuid=6f1e0a3e-8d0b-4c55-9a43-%012x", newid)
	s.finish(t, "OK", func() { nv.conf = final }, func(exit string) {
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

// destroy is DELETE /nodes/{node}/qemu/{vmid}: the config becomes
// `lock: destroyed` while the qmdestroy task removes the disks.
func (s *Server) destroy(req *request, v *vm) (any, *apiError) {
	for k := range req.params {
		if k != "purge" && k != "destroy-unreferenced-disks" && k != "skiplock" {
			return nil, paramErr(k, "property is not defined in schema and the schema does not allow additional properties")
		}
	}
	if v.conf["template"] == "1" && v.conf["protection"] == "1" {
		return nil, fail(500, "can't remove VM %d - protection mode enabled", v.vmid)
	}
	if l := v.locked(); l != "" && req.params.Get("skiplock") != "1" {
		return nil, fail(500, "VM is locked (%s)", l)
	}
	if v.status == "running" {
		return nil, fail(500, "VM %d is running - destroy failed", v.vmid)
	}
	return s.startDestroy(v, req.user).upid, nil
}

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

// agentIfaces is GET agent/network-get-interfaces.
func (s *Server) agentIfaces(v *vm) (any, *apiError) {
	switch {
	case v.status != "running":
		return nil, fail(500, "VM %d is not running", v.vmid)
	case v.conf["agent"] == "" || strings.HasPrefix(v.conf["agent"], "0"):
		return nil, fail(500, "No QEMU guest agent configured")
	case v.agent == nil:
		return nil, fail(500, "QEMU guest agent is not running")
	}
	return map[string]any{"result": v.agent}, nil
}

var _ = http.MethodGet
