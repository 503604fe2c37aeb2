package pvefake

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Op names a kind of API call, for FailNext.
type Op string

// The calls FailNext can target.
const (
	OpResources Op = "resources"     // GET /cluster/resources
	OpNextID    Op = "nextid"        // GET /cluster/nextid
	OpConfig    Op = "config"        // GET/PUT/POST …/qemu/{vmid}/config
	OpCurrent   Op = "status"        // GET …/qemu/{vmid}/status/current
	OpClone     Op = "clone"         // POST …/qemu/{vmid}/clone
	OpPower     Op = "power"         // POST …/qemu/{vmid}/status/{start,stop,shutdown}
	OpDestroy   Op = "destroy"       // DELETE …/qemu/{vmid}
	OpAgent     Op = "agent"         // GET …/agent/network-get-interfaces
	OpStorage   Op = "storage"       // GET …/storage[/{storage}/status]
	OpContent   Op = "content"       // GET …/storage/{storage}/content
	OpUpload    Op = "upload"        // POST …/storage/{storage}/upload
	OpDelVolume Op = "delete-volume" // DELETE …/storage/{storage}/content/{volume}
	OpTask      Op = "task"          // GET …/tasks/{upid}/{status,log}
	OpOther     Op = "other"
)

type fault struct {
	op  Op
	err *apiError
}

func (s *Server) opOf(req *request) Op {
	p, m := req.path, req.method
	switch {
	case eq(p, "cluster", "resources"):
		return OpResources
	case eq(p, "cluster", "nextid"):
		return OpNextID
	case len(p) >= 5 && p[0] == "nodes" && p[2] == "qemu":
		switch {
		case p[4] == "config":
			return OpConfig
		case p[4] == "clone":
			return OpClone
		case p[4] == "agent":
			return OpAgent
		case p[4] == "status" && len(p) == 6 && p[5] == "current":
			return OpCurrent
		case p[4] == "status":
			return OpPower
		}
	case len(p) == 4 && p[0] == "nodes" && p[2] == "qemu" && m == http.MethodDelete:
		return OpDestroy
	case len(p) >= 3 && p[0] == "nodes" && p[2] == "storage":
		switch {
		case len(p) >= 6 && m == http.MethodDelete:
			return OpDelVolume
		case len(p) == 5 && p[4] == "upload":
			return OpUpload
		case len(p) == 5 && p[4] == "content":
			return OpContent
		}
		return OpStorage
	case len(p) >= 4 && p[0] == "nodes" && p[2] == "tasks":
		return OpTask
	}
	return OpOther
}

// takeFault returns the first queued fault for op. Caller holds s.mu.
func (s *Server) takeFault(op Op) *apiError {
	for i, f := range s.faults {
		if f.op == op {
			s.faults = slices.Delete(s.faults, i, i+1)
			return f.err
		}
	}
	return nil
}

// FailNext makes the next call of op answer with status and PVE's message
// in the reason phrase (body {"data":null}).
func (s *Server) FailNext(op Op, status int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, fault{op: op, err: fail(status, "%s", msg)})
}

// FailNextParam makes the next call of op fail PVE's parameter check on
// field with msg (400 "Parameter verification failed.").
func (s *Server) FailNextParam(op Op, field, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, fault{op: op, err: paramErr(field, msg)})
}

// FailNextTask makes the next task of type typ (qmclone, qmstart,
// qmdestroy, imgcopy, …) end with exit status exit instead of OK.
func (s *Server) FailNextTask(typ, exit string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.taskExit[typ] = exit
}

// WarnNextTask makes the next task of type typ succeed with exit status
// "WARNINGS: <n>", as a worker that called warn n times does (a clone
// whose source volumes could not be deactivated, a start with a
// deprecated option).
func (s *Server) WarnNextTask(typ string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.taskExit[typ] = fmt.Sprintf("WARNINGS: %d", n)
}

// DropNextClone makes the next clone request start its task and then lose
// its answer: the connection closes before a response, as a proxy or a
// network cut would.
func (s *Server) DropNextClone() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropNext = true
}

// ClonesPastDisks makes the clones started from now show, while their
// task runs (HoldTasks), the config qemu-server's clone_vm writes after
// copying each disk — name, description and the rest, still `lock: clone` —
// instead of the temporary config holding only the lock.
func (s *Server) ClonesPastDisks(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.disksCopied = on
}

// HoldTasks keeps every task of type typ started from now on running until
// release is called.
func (s *Server) HoldTasks(typ string) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.hold[typ] = ch
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.hold[typ] == ch {
			delete(s.hold, typ)
			close(ch)
		}
	}
}

// DropNextAnswer makes the next call of op do its work and then lose its
// answer: the connection closes without one, as when the client gave up
// (its deadline) or the network failed after PVE acted. An upload's
// imgcopy worker, once forked, runs to its end whatever becomes of the
// connection (pve-storage src/PVE/API2/Storage/Status.pm upload:
// fork_worker; the worker copies pveproxy's temporary file to the
// storage), so with HoldTasks("imgcopy") the file lands after the client
// gave up, when the hold is released.
func (s *Server) DropNextAnswer(op Op) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropAnswer = op
}

// Stall holds every call from now on until release.
func (s *Server) Stall() (release func()) {
	release = s.gate.Stall()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalls = append(s.stalls, release)
	return release
}

// The answers of a cut call. pveproxy serves a call for another node by
// forwarding it with AnyEvent::HTTP and passes that client's status and
// reason on (pve-http-server, PVE/APIServer/AnyEvent.pm, proxy_request);
// AnyEvent::HTTP reports "errors during connection establishment" as 595
// and "errors during TLS negotiation, request sending and header
// processing" as 596, with the system error as the reason (AnyEvent::HTTP
// manual, http_request). pveproxy gives the forwarded call 30 s.
var (
	errCutBefore = fail(595, "Connection refused")
	errCutAfter  = fail(596, "Connection timed out")
)

// errNodeDown is pveproxy's answer for a call it forwards to a node it
// cannot reach (AnyEvent::HTTP's 595, "errors during connection
// establishment", with the system error: a node powered off or cut from
// the network answers "No route to host").
var errNodeDown = fail(595, "No route to host")

// NodeDown takes node off the network (down) or brings it back: every call
// under /nodes/<node>/ fails with 595 as pveproxy forwards it there. The
// node serving the API stays up, and what the cluster knows of the node's
// VMs (/cluster/resources) stays listed, as pmxcfs keeps it.
func (s *Server) NodeDown(node string, down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down[node] = down
}

// forDownNode reports whether the call at path goes to a node NodeDown
// took down.
func (s *Server) forDownNode(path string) bool {
	rest, ok := strings.CutPrefix(path, "/api2/json/nodes/")
	if !ok {
		return false
	}
	node, _, _ := strings.Cut(rest, "/")
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down[node]
}

// CutCall makes the n-th API call from now (1 is the next; counted as
// Calls counts) fail as a call lost between pveproxy and the node serving
// it: before it was served (595, nothing happened) or after (596, the
// call took effect and its answer was lost).
func (s *Server) CutCall(n int, after bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cut = cut{call: s.calls.Load() + int64(n), after: after}
}

// FailCall makes the n-th API call from now (1 is the next; counted as
// Calls counts), whatever it serves, answer status and msg as FailNext's
// faults do, before it takes effect and after the token is checked, as a
// handler's own die (PVE::Exception) answers. FailNext names the next call
// of a kind, so cannot fail, say, a Create's second config write. It
// takes the place of a pending CutCall.
func (s *Server) FailCall(n, status int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cut = cut{call: s.calls.Load() + int64(n), fault: fail(status, "%s", msg)}
}

// takeCut returns the cut CutCall or FailCall set when call n is the one
// it names, and forgets it.
func (s *Server) takeCut(n int64) (c cut, here bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cut.call != n {
		return cut{}, false
	}
	c, s.cut = s.cut, cut{}
	return c, true
}

// Reset undoes every control call that makes the fake misbehave: queued
// faults, failing tasks, a dropped clone answer, a cut or failed call
// (CutCall, FailCall), stalls, held tasks, a refused token, hidden names
// and the locks Lock set. The VMs, volumes and the token's secret stay as
// they are.
func (s *Server) Reset() {
	s.mu.Lock()
	stalls := s.stalls
	s.stalls = nil
	s.faults = nil
	clear(s.taskExit)
	s.dropNext = false
	s.dropAnswer = ""
	s.cut = cut{}
	s.rejected, s.rejectFrom = false, 0
	s.hideNames = false
	clear(s.down)
	s.disksCopied = false
	for typ, ch := range s.hold {
		delete(s.hold, typ)
		close(ch)
	}
	for vmid, lock := range s.locks {
		if v, ok := s.vms[vmid]; ok && v.conf["lock"] == lock {
			delete(v.conf, "lock")
		}
	}
	clear(s.locks)
	s.mu.Unlock()
	for _, release := range stalls {
		release()
	}
}

// Calls counts the API calls served.
func (s *Server) Calls() int { return int(s.calls.Load()) }

// CallsBesidesTaskPolls counts the API calls served other than task
// status and log reads. A task ends in the background, so whether the
// client's first poll sees it stopped depends on scheduling: counts that
// tests compare exactly leave the polls out.
func (s *Server) CallsBesidesTaskPolls() int { return int(s.calls.Load() - s.taskPolls.Load()) }

// RejectToken makes the fake refuse the API token (401) or accept it again.
func (s *Server) RejectToken(reject bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejected, s.rejectFrom = reject, 0
}

// RejectTokenFrom refuses the token from the n-th call from now on (1 is
// the next; counted as Calls counts), as RejectToken(true) does: a token
// revoked partway through an operation.
func (s *Server) RejectTokenFrom(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejectFrom = s.calls.Load() + int64(n)
}

// Lock sets `lock: <lock>` on the VM's config, as a running backup, clone
// or migration does, until unlock is called.
func (s *Server) Lock(vmid int, lock string) (unlock func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vms[vmid]
	if !ok {
		return nil, fmt.Errorf("no VM %d", vmid)
	}
	v.conf["lock"] = lock
	s.locks[vmid] = lock
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if v.conf["lock"] == lock {
			delete(v.conf, "lock")
		}
		delete(s.locks, vmid)
	}, nil
}

// BeginDestroy starts destroying the VM (stopping it first, as `qm destroy
// --purge` after `qm stop` would) and holds the qmdestroy task until finish.
func (s *Server) BeginDestroy(vmid int) (finish func(), err error) {
	release := s.HoldTasks("qmdestroy")
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vms[vmid]
	if !ok {
		release()
		return nil, fmt.Errorf("no VM %d", vmid)
	}
	v.status, v.agent = "stopped", nil
	s.startDestroy(v, s.opts.TokenID)
	return release, nil
}

// ReportIP plays the guest agent answering with one NIC holding ips (and
// lo); the VM must run.
func (s *Server) ReportIP(vmid int, ips ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vms[vmid]
	if !ok {
		return fmt.Errorf("no VM %d", vmid)
	}
	if v.status != "running" {
		return fmt.Errorf("VM %d is not running", vmid)
	}
	var addrs []map[string]any
	for _, ip := range ips {
		typ, prefix := "ipv4", 24
		if strings.Contains(ip, ":") {
			typ, prefix = "ipv6", 64
		}
		addrs = append(addrs, map[string]any{"ip-address-type": typ, "ip-address": ip, "prefix": prefix})
	}
	v.agent = []map[string]any{
		{"name": "lo", "hardware-address": "00:00:00:00:00:00", "ip-addresses": []map[string]any{
			{"ip-address-type": "ipv4", "ip-address": "127.0.0.1", "prefix": 8}, {"ip-address-type": "ipv6", "ip-address": "::1", "prefix": 128}}},
		{"name": "eth0", "hardware-address": "bc:24:11:00:00:02", "ip-addresses": addrs,
			"statistics": map[string]any{"rx-bytes": 1024, "tx-bytes": 512, "rx-packets": 10, "tx-packets": 5}},
	}
	return nil
}

// HangAgent makes the VM's guest agent hang: on ping (PVE answers "QEMU
// guest agent is not running" after its 3 s guest-ping timeout) or on the
// command (the ping answers; the command fails with QMPClient's "got
// timeout" after 5 s). The fake answers at once. unhang undoes it.
func (s *Server) HangAgent(vmid int, onPing bool) (unhang func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vms[vmid]
	if !ok {
		return nil, fmt.Errorf("no VM %d", vmid)
	}
	v.agentHung = hungCommand
	if onPing {
		v.agentHung = hungPing
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		v.agentHung = hungNot
	}, nil
}

// StopVM stops a running VM as POST .../status/stop's qmstop task ends
// it (vms.go power), at once, with no task to wait for.
func (s *Server) StopVM(vmid int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vms[vmid]
	if !ok || v.status != "running" {
		return fmt.Errorf("no running VM %d", vmid)
	}
	v.stop()
	return nil
}

// SetQMPStatus sets the QEMU run state status/current reports for a
// running VM (paused, internal-error, a state the provider does not know).
func (s *Server) SetQMPStatus(vmid int, qmp string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vms[vmid]
	if !ok || v.status != "running" {
		return fmt.Errorf("no running VM %d", vmid)
	}
	v.qmp = qmp
	return nil
}

// CloneVM clones src into the lowest free VMID from 100 with name and no
// description or tags, as a person in the web UI would; it returns the VMID.
func (s *Server) CloneVM(src int, name string) (int, error) {
	return s.CloneVMTo(src, "", name)
}

// CloneVMTo is CloneVM onto node ("" is src's node).
func (s *Server) CloneVMTo(src int, node, name string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	from, ok := s.vms[src]
	if !ok {
		return 0, fmt.Errorf("no VM %d", src)
	}
	if node == "" {
		node = from.node
	}
	if !s.isNode(node) {
		return 0, fmt.Errorf("no node %q", node)
	}
	id := 100
	for ; s.vms[id] != nil; id++ {
	}
	conf := map[string]string{}
	for k, v := range from.conf {
		if k != "template" && k != "lock" {
			conf[k] = v
		}
	}
	conf["name"] = name
	conf["scsi0"] = fmt.Sprintf("local-lvm:vm-%d-disk-0,size=2G", id)
	s.vms[id] = &vm{vmid: id, node: node, status: "stopped", conf: conf}
	return id, nil
}

// RemoveVM removes a VM and its disks at once, as `qm destroy` by a
// person would; a VM already gone is no error.
func (s *Server) RemoveVM(vmid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.vms, vmid)
	delete(s.locks, vmid)
}

// Config returns a copy of the VM's config, or false if there is no VM.
func (s *Server) Config(vmid int) (map[string]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vms[vmid]
	if !ok {
		return nil, false
	}
	out := map[string]string{}
	for k, val := range v.conf {
		out[k] = val
	}
	return out, true
}

// Node returns the node a VM is on, "" if there is no VM.
func (s *Server) Node(vmid int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.vms[vmid]; ok {
		return v.node
	}
	return ""
}

// Volume returns the content of a volume, by volid, on node.
func (s *Server) Volume(node, volid string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name, _, _ := strings.Cut(volid, ":")
	st, ok := s.storageOn(node, name)
	if !ok {
		return nil, false
	}
	data, ok := st.volumes[volid]
	return data, ok
}

// Inventory lists every VM (but the templates), every volume and every
// task still running, one string each.
func (s *Server) Inventory() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, id := range s.sortedVMIDs() {
		v := s.vms[id]
		if v.conf["template"] == "1" {
			continue
		}
		out = append(out, "vm "+strconv.Itoa(id)+" "+v.conf["name"])
	}
	keys := make([]string, 0, len(s.storages))
	for k := range s.storages {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for volid := range s.storages[k].volumes {
			out = append(out, "volume "+k+" "+volid)
		}
	}
	for _, t := range s.tasks {
		if t.status == "running" {
			out = append(out, "task "+t.upid)
		}
	}
	sort.Strings(out)
	return out
}

// WaitTasks waits until every task started so far has ended.
func (s *Server) WaitTasks() {
	s.mu.Lock()
	var chans []chan struct{}
	for _, t := range s.tasks {
		chans = append(chans, t.completed)
	}
	s.mu.Unlock()
	for _, c := range chans {
		<-c
	}
}

// RotateSecret replaces the API token's secret, as regenerating a token
// in PVE does: the old secret is refused from now on.
func (s *Server) RotateSecret(secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.Secret = secret
}

// HideNames makes /cluster/resources list VMs (not templates) as it does
// before pvestatd's first update of their VMID: no name, status "unknown"
// (pve-manager PVE/API2Tools.pm extract_vm_stats without RRD data;
// pvestatd.pm updates every 10 s). status/current and the config have the
// name at once.
func (s *Server) HideNames(hide bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hideNames = hide
}

// CloneRequests returns the parameters of every clone request served so
// far, each with the source's "node" and "vmid" added, in order.
func (s *Server) CloneRequests() []url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]url.Values, len(s.clones))
	for i, c := range s.clones {
		out[i] = maps.Clone(c)
	}
	return out
}

// Pool returns the pool a VM is in, "" for none or no VM.
func (s *Server) Pool(vmid int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.vms[vmid]; ok {
		return v.pool
	}
	return ""
}

func cloneRequest(req *request, src *vm) url.Values {
	out := url.Values{"node": {src.node}, "vmid": {strconv.Itoa(src.vmid)}}
	for k, v := range req.params {
		out[k] = slices.Clone(v)
	}
	return out
}

// SetConfig sets one key of a VM's config, as a person in the web UI
// would (attaching an ISO to a template, say).
func (s *Server) SetConfig(vmid int, key, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vms[vmid]
	if !ok {
		return fmt.Errorf("no VM %d", vmid)
	}
	v.conf[key] = value
	return nil
}
