package pvefake

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

// Options describe the cluster the fake serves.
type Options struct {
	// Nodes are the cluster's node names. Default ["pve"].
	Nodes []string
	// Storages exist on every node; a Shared one is the same storage
	// everywhere, the others are one per node.
	Storages []StorageSpec
	// Templates are template VMs, each on its node.
	Templates []Template
	// TokenID ("user@realm!name") and Secret are the one API token the
	// fake accepts.
	TokenID, Secret string
	// TagAccess is datacenter.cfg's tag settings; the zero value is PVE's
	// default (free, case-insensitive).
	TagAccess TagAccess
	// Version is the PVE major release the fake plays, 8 or 9: its API
	// schema (schema/facts-pve<N>.json) and privileges. Default 9: the
	// current major release, which new clusters run; 8 (Debian 12) is the
	// previous one, kept while clusters upgrade.
	Version int
	// ACL is the token's ACL (a privilege-separated token's own entries).
	// nil means every privilege on / (Administrator); the provider's
	// tests give it the role the guide documents.
	ACL []ACE
	// Pools are the resource pools that exist (user.cfg's pools).
	Pools []string
}

// StorageSpec is one storage.
type StorageSpec struct {
	Name    string
	Type    string   // dir, lvmthin, …
	Content []string // iso, images, rootdir, vztmpl, snippets, import
	Shared  bool
	// Total is the capacity in bytes; default 100 GiB.
	Total int64
	// Offline is an enabled storage that does not answer (an NFS server
	// down): pve-storage's activate_storage dies "storage '<name>' is not
	// online" (src/PVE/Storage.pm, check_connection), so its content
	// cannot be listed or written, its status shows active 0, and a
	// destroy with destroy-unreferenced-disks fails (destroy).
	Offline bool
}

// Template is a template VM.
type Template struct {
	VMID int
	Name string
	Node string
	// Storage holds the template's disk (scsi0); default "local-lvm". A
	// template on a storage without Shared can be cloned only on its own
	// node (qemu-server clone_vm).
	Storage string
}

// Server is the fake PVE API. Its URL is the API root
// (https://127.0.0.1:port); go-proxmox's base URL is URL+"/api2/json".
type Server struct {
	*httptest.Server

	opts  Options
	calls atomic.Int64
	// taskPolls counts the task status and log reads among calls: how
	// many a client makes depends on when the task's goroutine ends.
	taskPolls atomic.Int64
	gate      contracttest.Gate

	mu       sync.Mutex
	rejected bool
	// rejectFrom is the call, counted by calls, from which the token is
	// refused (RejectTokenFrom); zero: none.
	rejectFrom int64
	vms        map[int]*vm
	cts        map[int]*container
	down       map[string]bool     // nodes NodeDown took off the network
	storages   map[string]*storage // by storageKey
	tasks      map[string]*task
	pid        int
	faults     []fault
	taskExit   map[string]string // task type → exit status of its next run
	dropNext   bool
	// dropAnswer is the op whose next call DropNextAnswer loses the
	// answer of ("" for none).
	dropAnswer Op
	// disksCopied makes clones show the config clone_vm writes after its
	// disk copies (ClonesPastDisks).
	disksCopied bool
	// hideNames plays pvestatd's lag: the list's names come from its
	// status updates, seconds behind the config.
	hideNames bool
	hold      map[string]chan struct{} // task type → closed to release
	// cut is the one call CutCall or FailCall named, by its number in
	// calls; zero cuts nothing.
	cut cut
	// stalls are the releases of every Stall not yet released, for Reset.
	stalls []func()
	// locks are the locks Lock set, for Reset to lift.
	locks map[int]string
	// servedSet are the kinds of call served (ServedCalls).
	servedSet map[string]Served
	// clones are the parameters of every clone request, for CloneRequests.
	clones []url.Values
}

// cut names one call and how it fails: lost before or after taking
// effect (CutCall), or answered with fault before it takes effect
// (FailCall).
type cut struct {
	call  int64
	after bool
	fault *apiError
}

// New starts a fake cluster; Close stops it.
func New(opts Options) *Server {
	if len(opts.Nodes) == 0 {
		opts.Nodes = []string{"pve"}
	}
	if opts.Version == 0 {
		opts.Version = 9
	}
	if schemas[opts.Version] == nil {
		panic(fmt.Sprintf("pvefake: PVE version %d has no pinned schema (8 or 9)", opts.Version))
	}
	s := &Server{
		opts: opts, vms: map[int]*vm{}, cts: map[int]*container{}, down: map[string]bool{}, storages: map[string]*storage{}, tasks: map[string]*task{},
		pid: 0x1000, taskExit: map[string]string{}, hold: map[string]chan struct{}{}, locks: map[int]string{},
	}
	for _, spec := range opts.Storages {
		if spec.Total == 0 {
			spec.Total = 100 << 30
		}
		for _, node := range opts.Nodes {
			key := storageKey(spec, node)
			if _, ok := s.storages[key]; !ok {
				s.storages[key] = &storage{spec: spec, volumes: map[string][]byte{}}
			}
		}
	}
	for _, t := range opts.Templates {
		if t.Storage == "" {
			t.Storage = "local-lvm"
		}
		s.vms[t.VMID] = &vm{vmid: t.VMID, node: t.Node, status: "stopped", conf: map[string]string{
			"name": t.Name, "template": "1", "cores": "1", "memory": "512", "agent": "1", "ostype": "l26",
			"scsihw": "virtio-scsi-single", "scsi0": fmt.Sprintf("%s:base-%d-disk-0,size=2G", t.Storage, t.VMID),
			"net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0", "boot": "order=scsi0;net0",
			"meta": "creation-qemu=8.1.5,ctime=1700000000", "smbios1": "uuid=6f1e0a3e-8d0b-4c55-9a43-0c1d7b0f9a01",
		}}
	}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	return s
}

func storageKey(spec StorageSpec, node string) string {
	if spec.Shared {
		return spec.Name
	}
	return node + "/" + spec.Name
}

// BaseURL is what go-proxmox's NewClient takes.
func (s *Server) BaseURL() string { return s.URL + "/api2/json" }

// apiError is an error PVE answers with: the message goes into the reason
// phrase; parameter errors also carry an "errors" object in the body.
type apiError struct {
	status int
	msg    string
	params map[string]string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s", e.status, e.msg) }

func fail(status int, format string, args ...any) *apiError {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

// paramErr is PVE's 400 for a parameter that fails the schema
// (PVE::JSONSchema::validate → raise_param_exc).
func paramErr(field, msg string) *apiError {
	return &apiError{status: 400, msg: "Parameter verification failed.", params: map[string]string{field: msg}}
}

func notExist(node string, vmid int) *apiError {
	return fail(500, "Configuration file 'nodes/%s/qemu-server/%d.conf' does not exist", node, vmid)
}

// request is one parsed API call.
type request struct {
	method string
	path   []string // segments after /api2/json, unescaped
	params url.Values
	r      *http.Request
	user   string
	upload *uploaded
}

// uploaded is the file part of a multipart upload.
type uploaded struct {
	name string
	data []byte
}

// serve authenticates, routes and answers one call.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	n := s.calls.Add(1)
	s.mu.Lock()
	if s.rejectFrom != 0 && n >= s.rejectFrom {
		s.rejected, s.rejectFrom = true, 0
	}
	s.mu.Unlock()
	if s.gate.Pass(r.Context()) != nil {
		return
	}
	c, here := s.takeCut(n)
	// A FailCall fault is no cut: the node gets the call and answers it
	// (route).
	cutHere := here && c.fault == nil
	if s.forDownNode(r.URL.Path) {
		_, _ = io.Copy(io.Discard, r.Body)
		writeError(w, errNodeDown)
		return
	}
	if cutHere && !c.after {
		// The request never reached the node that would serve it.
		_, _ = io.Copy(io.Discard, r.Body)
		writeError(w, errCutBefore)
		return
	}
	req, err := s.parse(r)
	if err == nil {
		err = s.authenticate(req)
	}
	var data any
	var after func()
	if err == nil {
		data, after, err = s.route(req, c.fault)
	}
	if cutHere {
		// The node did the work; its answer is lost.
		if after != nil {
			after()
		}
		writeError(w, errCutAfter)
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if after != nil {
		// DropNextClone: the work is done, the answer is lost.
		after()
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, herr := hj.Hijack(); herr == nil {
				_ = conn.Close()
				return
			}
		}
	}
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	body, _ := json.Marshal(map[string]any{"data": data})
	_, _ = w.Write(body)
}

// writeError answers like pveproxy: the status line carries the message as
// its reason phrase, which net/http cannot write, so the connection is
// hijacked and the response written by hand.
func writeError(w http.ResponseWriter, err *apiError) {
	body := map[string]any{"data": nil}
	if err.params != nil {
		body["errors"] = err.params
	}
	b, _ := json.Marshal(body)
	reason := strings.NewReplacer("\r", " ", "\n", " ").Replace(strings.TrimSpace(err.msg))
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, reason, err.status)
		return
	}
	conn, buf, herr := hj.Hijack()
	if herr != nil {
		return
	}
	defer func() { _ = conn.Close() }()
	writeRaw(buf, err.status, reason, b)
}

func writeRaw(buf *bufio.ReadWriter, status int, reason string, body []byte) {
	_, _ = fmt.Fprintf(buf, "HTTP/1.1 %03d %s\r\nContent-Type: application/json;charset=UTF-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", status, reason, len(body))
	_, _ = buf.Write(body)
	_ = buf.Flush()
}

func (s *Server) parse(r *http.Request) (*request, *apiError) {
	raw := r.URL.EscapedPath()
	rest, ok := strings.CutPrefix(raw, "/api2/json/")
	if !ok {
		return nil, fail(501, "Not Implemented")
	}
	var segs []string
	for _, seg := range strings.Split(strings.TrimSuffix(rest, "/"), "/") {
		u, err := url.PathUnescape(seg)
		if err != nil {
			return nil, fail(400, "Bad Request")
		}
		segs = append(segs, u)
	}
	params := r.URL.Query()
	var upload *uploaded
	if r.Method == http.MethodPost || r.Method == http.MethodPut {
		ct := r.Header.Get("Content-Type")
		switch {
		case strings.HasPrefix(ct, "application/json"):
			var body map[string]any
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil && err.Error() != "EOF" {
				return nil, fail(400, "Bad Request: %v", err)
			}
			for k, v := range body {
				params.Set(k, scalar(v))
			}
		case strings.HasPrefix(ct, "multipart/form-data"):
			var err *apiError
			if upload, err = parseMultipart(r, params); err != nil {
				return nil, err
			}
		default:
			if err := r.ParseForm(); err == nil {
				for k, v := range r.PostForm {
					params[k] = v
				}
			}
		}
	}
	return &request{method: r.Method, path: segs, params: params, r: r, upload: upload}, nil
}

// parseMultipart reads a multipart body's fields into params and its one
// file part named "filename" (none when there are several) as the upload.
// The file is read once into a buffer of the body's length: under the
// race detector every copy of a 16 MiB seed costs seconds, and
// ParseMultipartForm and a ReadAll copy it over and over as their buffers
// grow.
func parseMultipart(r *http.Request, params url.Values) (*uploaded, *apiError) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, fail(400, "Bad Request: %v", err)
	}
	var files []*uploaded
	form := url.Values{}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fail(400, "Bad Request: %v", err)
		}
		name := part.FormName()
		switch {
		case name == "":
		case part.FileName() == "":
			v, err := io.ReadAll(io.LimitReader(part, 1<<20))
			if err != nil {
				return nil, fail(400, "Bad Request: %v", err)
			}
			form.Add(name, string(v))
		case name == "filename":
			buf := bytes.NewBuffer(make([]byte, 0, max(r.ContentLength, 0)+bytes.MinRead))
			if _, err := buf.ReadFrom(part); err != nil {
				return nil, fail(400, "Bad Request: %v", err)
			}
			files = append(files, &uploaded{name: part.FileName(), data: buf.Bytes()})
		}
		_ = part.Close()
	}
	for k, v := range form {
		params[k] = v // the body's fields replace the query's
	}
	if len(files) != 1 {
		return nil, nil
	}
	return files[0], nil
}

// scalar renders a JSON value as PVE's parameter parser sees it.
func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool:
		if x {
			return "1"
		}
		return "0"
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case nil:
		return ""
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// authenticate checks the API token header (PVEAPIToken=USER@REALM!ID=SECRET).
func (s *Server) authenticate(req *request) *apiError {
	h := req.r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "PVEAPIToken=")
	if !ok {
		return fail(401, "No ticket")
	}
	id, secret, _ := strings.Cut(tok, "=")
	s.mu.Lock()
	rejected, want := s.rejected, s.opts.Secret
	s.mu.Unlock()
	if id != s.opts.TokenID || secret != want || rejected {
		return fail(401, "invalid token value!")
	}
	req.user = id
	return nil
}

// match reports whether path matches pattern; "*" segments are captured.
func match(path []string, pattern ...string) ([]string, bool) {
	if len(path) != len(pattern) {
		return nil, false
	}
	var vars []string
	for i, p := range pattern {
		switch {
		case p == "*":
			vars = append(vars, path[i])
		case p != path[i]:
			return nil, false
		}
	}
	return vars, true
}

// route dispatches a call; the op names are what FailNext targets. A
// fault FailCall set on the call is answered where FailNext's are, before
// the call takes effect.
func (s *Server) route(req *request, fault *apiError) (any, func(), *apiError) {
	p, m := req.path, req.method
	s.mu.Lock()
	defer s.mu.Unlock()
	op := s.opOf(req)
	if op == OpTask {
		s.taskPolls.Add(1)
	}
	if fault != nil {
		return nil, nil, fault
	}
	if err := s.takeFault(op); err != nil {
		return nil, nil, err
	}
	if v, ok := match(p, "nodes", "*", "*"); ok && v[1] != "qemu" && v[1] != "storage" && v[1] != "tasks" && v[1] != "status" {
		return nil, nil, fail(501, "Method '%s /nodes/%s/%s' not implemented", m, v[0], v[1])
	}
	if v, ok := match(p, "nodes", "*"); ok || (len(p) > 1 && p[0] == "nodes") {
		if !ok {
			v = p[1:2]
		}
		if !s.isNode(v[0]) {
			return nil, nil, fail(500, "hostname lookup '%s' failed - failed to get address info for: %s: Name or service not known", v[0], v[0])
		}
	}
	// The pinned schema's validation and permissions, then the handler.
	ep, _, err := s.admit(req)
	if err != nil {
		return nil, nil, err
	}
	d, after, err := s.dispatch(req)
	if err == nil {
		d = s.visible(ep, d)
		if s.dropAnswer != "" && s.dropAnswer == op {
			// DropNextAnswer: the work is done, the answer is lost.
			s.dropAnswer = ""
			if after == nil {
				after = func() {}
			}
		}
	}
	return d, after, err
}

// dispatch runs the handler of a call. Caller holds s.mu.
func (s *Server) dispatch(req *request) (any, func(), *apiError) {
	p, m := req.path, req.method
	get, post, put, del := m == http.MethodGet, m == http.MethodPost, m == http.MethodPut, m == http.MethodDelete
	switch {
	case get && eq(p, "version"):
		// The pinned schema's release (schema/SOURCE).
		ver := schemas[s.opts.Version].Version
		return map[string]string{"version": ver, "release": ver[:strings.LastIndex(ver, ".")], "repoid": schemas[s.opts.Version].Commit[:16]}, nil, nil
	case get && eq(p, "cluster", "nextid"):
		d, err := s.nextID(req)
		return d, nil, err
	case get && eq(p, "cluster", "resources"):
		return s.resources(req), nil, nil
	case get && eq(p, "cluster", "status"):
		return s.clusterStatus(), nil, nil
	}
	if v, ok := match(p, "nodes", "*", "status"); ok && get {
		return map[string]any{"uptime": 86400, "pveversion": "pve-manager/" + schemas[s.opts.Version].Version + "/" + schemas[s.opts.Version].Commit[:16], "kversion": "Linux 6.8.8-2-pve", "node": v[0]}, nil, nil
	}
	if v, ok := match(p, "nodes", "*", "qemu"); ok && get {
		return s.listVMs(v[0]), nil, nil
	}
	if d, after, err, ok := s.routeVM(req, get, post, put, del); ok {
		return d, after, err
	}
	if d, err, ok := s.routeStorage(req, get, post, del); ok {
		return d, nil, err
	}
	if v, ok := match(p, "nodes", "*", "tasks"); ok && get {
		return s.taskList(v[0], req.params), nil, nil
	}
	if v, ok := match(p, "nodes", "*", "tasks", "*", "status"); ok && get {
		d, err := s.taskStatus(v[0], v[1])
		return d, nil, err
	}
	if v, ok := match(p, "nodes", "*", "tasks", "*", "log"); ok && get {
		d, err := s.taskLog(v[0], v[1])
		return d, nil, err
	}
	return nil, nil, fail(501, "Method '%s /%s' not implemented", m, strings.Join(p, "/"))
}

func eq(path []string, want ...string) bool {
	_, ok := match(path, want...)
	return ok
}

func (s *Server) isNode(name string) bool {
	for _, n := range s.opts.Nodes {
		if n == name {
			return true
		}
	}
	return false
}

func (s *Server) clusterStatus() []map[string]any {
	out := []map[string]any{{"type": "cluster", "id": "cluster", "name": "fake", "nodes": len(s.opts.Nodes), "quorate": 1, "version": 3}}
	for i, n := range s.opts.Nodes {
		out = append(out, map[string]any{"type": "node", "id": "node/" + n, "name": n, "nodeid": i + 1, "online": 1, "local": b2i(i == 0), "ip": fmt.Sprintf("127.0.0.%d", i+1)})
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// nextID is GET /cluster/nextid: the lowest free VMID from 100, or, with
// vmid=N, N itself when free.
func (s *Server) nextID(req *request) (any, *apiError) {
	if v := req.params.Get("vmid"); v != "" {
		id, _ := strconv.Atoi(v) // the schema checked it (pve-vmid)
		if s.vmidUsed(id) {
			return nil, paramErr("vmid", fmt.Sprintf("VM %d already exists", id))
		}
		return strconv.Itoa(id), nil
	}
	for id := 100; ; id++ {
		if !s.vmidUsed(id) {
			return strconv.Itoa(id), nil
		}
	}
}

// resources is GET /cluster/resources[?type=vm|storage|node|sdn].
func (s *Server) resources(req *request) any {
	typ := req.params.Get("type") // the schema checked the enumeration
	out := []map[string]any{}
	if typ == "" || typ == "vm" {
		for _, id := range s.sortedVMIDs() {
			out = append(out, s.vms[id].resource(s.hideNames))
		}
		for _, id := range slices.Sorted(maps.Keys(s.cts)) {
			out = append(out, s.cts[id].resource())
		}
	}
	if typ == "" || typ == "node" {
		for _, n := range s.opts.Nodes {
			out = append(out, map[string]any{"id": "node/" + n, "type": "node", "node": n, "status": "online", "maxcpu": 8, "maxmem": 32 << 30})
		}
	}
	if typ == "" || typ == "storage" {
		for _, n := range s.opts.Nodes {
			for _, spec := range s.opts.Storages {
				st := s.storages[storageKey(spec, n)]
				out = append(out, map[string]any{"id": "storage/" + n + "/" + spec.Name, "type": "storage", "node": n, "storage": spec.Name,
					"status": "available", "shared": b2i(spec.Shared), "content": strings.Join(spec.Content, ","), "plugintype": spec.Type,
					"maxdisk": spec.Total, "disk": st.used()})
			}
		}
	}
	return out
}

func (s *Server) sortedVMIDs() []int {
	ids := make([]int, 0, len(s.vms))
	for id := range s.vms {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	return ids
}
