package pvefake

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// storage is one storage's content: volumes by volid.
type storage struct {
	spec    StorageSpec
	volumes map[string][]byte
	ctime   map[string]int64
}

func (st *storage) used() int64 {
	var n int64
	for _, v := range st.volumes {
		n += int64(len(v))
	}
	return n
}

func (st *storage) status() map[string]any {
	used := st.used()
	return map[string]any{"storage": st.spec.Name, "type": st.spec.Type, "content": strings.Join(st.spec.Content, ","),
		"active": b2i(!st.spec.Offline), "enabled": 1, "shared": b2i(st.spec.Shared), "total": st.spec.Total, "used": used,
		"avail": st.spec.Total - used, "used_fraction": float64(used) / float64(st.spec.Total)}
}

// notOnline is activate_storage's error for a storage that does not
// answer (pve-storage src/PVE/Storage.pm activate_storage).
func notOnline(name string) *apiError {
	return fail(500, "storage '%s' is not online", name)
}

func (s *Server) storageOn(node, name string) (*storage, bool) {
	for _, spec := range s.opts.Storages {
		if spec.Name == name {
			st, ok := s.storages[storageKey(spec, node)]
			return st, ok
		}
	}
	return nil, false
}

func (s *Server) routeStorage(req *request, get, post, del bool) (any, *apiError, bool) {
	p := req.path
	if len(p) < 3 || p[0] != "nodes" || p[2] != "storage" {
		return nil, nil, false
	}
	node := p[1]
	if len(p) == 3 && get {
		out := []map[string]any{}
		for _, spec := range s.opts.Storages {
			if c := req.params.Get("content"); c != "" && !slices.Contains(spec.Content, c) {
				continue
			}
			out = append(out, s.storages[storageKey(spec, node)].status())
		}
		return out, nil, true
	}
	if len(p) < 5 {
		return nil, fail(501, "Method '%s /%s' not implemented", req.method, strings.Join(p, "/")), true
	}
	st, ok := s.storageOn(node, p[3])
	if !ok {
		return nil, fail(500, "storage '%s' does not exist", p[3]), true
	}
	rest := p[4:]
	if st.spec.Offline && !eq(rest, "status") {
		return nil, notOnline(st.spec.Name), true
	}
	switch {
	case get && eq(rest, "status"):
		return st.status(), nil, true
	case get && eq(rest, "content"):
		return s.content(st, req.params.Get("content"), req.params.Get("vmid")), nil, true
	case post && eq(rest, "upload"):
		d, err := s.upload(req, node, st)
		return d, err, true
	case del && len(rest) >= 2 && rest[0] == "content":
		return s.deleteVolume(req, node, st, strings.Join(rest[1:], "/")), nil, true
	}
	return nil, fail(501, "Method '%s /%s' not implemented", req.method, strings.Join(p, "/")), true
}

// content is GET .../content[?content=…][&vmid=…], as pve-storage's
// volume_list and the dir plugin's list_volumes build it (src/PVE/Storage.pm
// volume_list, Storage/Plugin.pm list_volumes, get_subdir_files): only the
// content types the storage holds, no ISO or container template when a
// vmid is given (they have no owner), sorted by volid case-insensitively;
// each item has volid, content, format, size and ctime.
func (s *Server) content(st *storage, kind, vmid string) []map[string]any {
	out := []map[string]any{}
	ids := make([]string, 0, len(st.volumes))
	for id := range st.volumes {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return strings.ToLower(ids[i]) < strings.ToLower(ids[j]) })
	for _, id := range ids {
		c := contentOf(id)
		if (kind != "" && c != kind) || !slices.Contains(st.spec.Content, c) || (vmid != "" && (c == "iso" || c == "vztmpl")) {
			continue
		}
		out = append(out, map[string]any{"volid": id, "content": c, "format": strings.TrimPrefix(path.Ext(id), "."),
			"size": len(st.volumes[id]), "ctime": st.ctime[id]})
	}
	return out
}

// contentOf reads the content type from a volid, storage:iso/name.iso.
func contentOf(volid string) string {
	_, rel, _ := strings.Cut(volid, ":")
	dir, _, _ := strings.Cut(rel, "/")
	return dir
}

// upload is POST .../upload (multipart: content, filename), in the order
// of pve-storage src/PVE/API2/Storage/Status.pm upload (PVE 8.4 and 9.1):
// the storage must have a path (a directory-type storage), the file name
// is normalized (path dropped, any character outside [a-zA-Z0-9_.-]
// becomes '_': PVE::Storage::normalize_content_filename), its extension
// checked case-insensitively, the content type checked last; the file
// then lands through an imgcopy task without an ID, replacing a file of
// the same name.
func (s *Server) upload(req *request, node string, st *storage) (any, *apiError) {
	kind := req.params.Get("content") // the schema checked the enumeration
	if req.upload == nil {
		// A "filename" form field without a file part: no source found
		// for PVE's answer; the fake keeps the schema's missing-parameter text.
		return nil, paramErr("filename", "property is missing and it is not optional")
	}
	if st.dir() == "" {
		return nil, fail(500, "can't upload to storage type '%s'", st.spec.Type)
	}
	name := normalizeFilename(req.upload.name)
	switch kind {
	case "iso":
		if !isoExtRE.MatchString(name) {
			return nil, paramErr("filename", "wrong file extension")
		}
	case "vztmpl":
		if !vztmplExtRE.MatchString(name) {
			return nil, paramErr("filename", "wrong file extension")
		}
	case "import":
		if !importExtRE.MatchString(name) {
			return nil, paramErr("filename", "invalid filename or wrong extension")
		}
	}
	if !slices.Contains(st.spec.Content, kind) {
		return nil, fail(500, "storage '%s' does not support '%s' content", st.spec.Name, kind)
	}
	volid := fmt.Sprintf("%s:%s/%s", st.spec.Name, kind, name)
	data := req.upload.data
	t := s.newTask(node, "imgcopy", "", req.user)
	// What the worker prints before its copy (Status.pm upload, $worker):
	// a running imgcopy task's log names the file it is writing.
	tmp := fmt.Sprintf("/var/tmp/pveupload-%032x", t.pid)
	dest := fmt.Sprintf("%s/template/%s/%s", st.dir(), kind, name)
	t.log = append(t.log, "starting file import from: "+tmp, "target node: "+node, "target file: "+dest,
		fmt.Sprintf("file size is: %d", len(data)), "command: cp -- "+tmp+" "+dest)
	if st.used()+int64(len(data)) > st.spec.Total {
		// The worker's cp fails; run_command with errmsg dies with
		// "import failed: <cp's last stderr line>" (pve-common Cmd.pm).
		s.finish(t, fmt.Sprintf("import failed: cp: error writing '%s/template/%s/%s': No space left on device", st.dir(), kind, name), nil)
		return t.upid, nil
	}
	s.finish(t, "OK", func() {
		t.log = append(t.log, "finished file import successfully")
		if st.ctime == nil {
			st.ctime = map[string]int64{}
		}
		st.volumes[volid] = data
		st.ctime[volid] = time.Now().Unix()
	})
	return t.upid, nil
}

var (
	// The upload's extension checks (pve-storage src/PVE/Storage.pm
	// ISO_EXT_RE_0, VZTMPL_EXT_RE_1, UPLOAD_IMPORT_EXT_RE_1).
	isoExtRE    = regexp.MustCompile(`(?i)^[^/]+\.(iso|img)$`)
	vztmplExtRE = regexp.MustCompile(`(?i)^[^/]+\.(tar|tar\.(gz|xz|zst|bz2))$`)
	importExtRE = regexp.MustCompile(`^[A-Za-z0-9_.+=-]+\.(ova|qcow2|raw|vmdk)$`)
	unsafeRE    = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)
)

// normalizeFilename is PVE::Storage::normalize_content_filename.
func normalizeFilename(name string) string {
	name = strings.TrimSuffix(name, "\n")
	if i := strings.LastIndexAny(name, "/\\"); i >= 0 {
		name = name[i+1:]
	}
	return unsafeRE.ReplaceAllString(name, "_")
}

// dir is the storage's path for the types that have one ("" for the
// block and object storages, which take no upload). The fake's paths are
// PVE's defaults: /var/lib/vz for "local", /mnt/pve/<id> otherwise.
func (st *storage) dir() string {
	switch st.spec.Type {
	case "dir", "nfs", "cifs", "cephfs", "glusterfs", "btrfs":
		if st.spec.Name == "local" {
			return "/var/lib/vz"
		}
		return "/mnt/pve/" + st.spec.Name
	}
	return ""
}

// deleteVolume is DELETE .../content/{volume}; volume is a full volid or
// its part after "storage:". pve-storage src/PVE/API2/Storage/Content.pm
// delete forks an imgdel task whose ID is "<owner vmid>@<storage>" or,
// for a volume no VM owns (an ISO), the storage ID; vdisk_free runs in
// the task, and a file already gone is a warning, not an error
// (Storage/Plugin.pm free_image: "disk image '<path>' does not exist"),
// so the task ends WARNINGS: 1.
func (s *Server) deleteVolume(req *request, node string, st *storage, volume string) any {
	volid := volume
	if !strings.Contains(volid, ":") {
		volid = st.spec.Name + ":" + volid
	}
	t := s.newTask(node, "imgdel", st.spec.Name, req.user)
	if _, ok := st.volumes[volid]; !ok {
		_, rel, _ := strings.Cut(volid, ":")
		t.log = append(t.log, fmt.Sprintf("disk image '%s/template/%s' does not exist", st.dir(), rel))
		s.finish(t, "WARNINGS: 1", nil)
		return t.upid
	}
	s.finish(t, "OK", func() { delete(st.volumes, volid) })
	return t.upid
}
