package pvefake

import (
	"fmt"
	"path"
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
		"active": 1, "enabled": 1, "shared": b2i(st.spec.Shared), "total": st.spec.Total, "used": used,
		"avail": st.spec.Total - used, "used_fraction": float64(used) / float64(st.spec.Total)}
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
	switch {
	case get && eq(rest, "status"):
		return st.status(), nil, true
	case get && eq(rest, "content"):
		return s.content(st, req.params.Get("content")), nil, true
	case post && eq(rest, "upload"):
		d, err := s.upload(req, node, st)
		return d, err, true
	case del && len(rest) >= 2 && rest[0] == "content":
		d, err := s.deleteVolume(req, node, st, strings.Join(rest[1:], "/"))
		return d, err, true
	}
	return nil, fail(501, "Method '%s /%s' not implemented", req.method, strings.Join(p, "/")), true
}

// content is GET .../content[?content=iso].
func (s *Server) content(st *storage, kind string) []map[string]any {
	out := []map[string]any{}
	ids := make([]string, 0, len(st.volumes))
	for id := range st.volumes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		c := contentOf(id)
		if kind != "" && c != kind {
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

// upload is POST .../upload (multipart: content, filename): the file lands
// through an imgcopy task.
func (s *Server) upload(req *request, node string, st *storage) (any, *apiError) {
	kind := req.params.Get("content")
	switch kind {
	case "":
		return nil, paramErr("content", "property is missing and it is not optional")
	case "iso", "vztmpl", "import":
	default:
		return nil, paramErr("content", fmt.Sprintf("value '%s' does not have a value in the enumeration 'iso, vztmpl, import'", kind))
	}
	if !slices.Contains(st.spec.Content, kind) {
		return nil, fail(500, "storage '%s' does not support '%s' content", st.spec.Name, kind)
	}
	if req.upload == nil {
		return nil, paramErr("filename", "property is missing and it is not optional")
	}
	name := req.upload.name
	if kind == "iso" && !strings.HasSuffix(name, ".iso") && !strings.HasSuffix(name, ".img") {
		return nil, paramErr("filename", "wrong file extension")
	}
	if strings.ContainsAny(name, "/\\") || strings.HasPrefix(name, ".") {
		return nil, paramErr("filename", "invalid format - value does not match the regex pattern")
	}
	volid := fmt.Sprintf("%s:%s/%s", st.spec.Name, kind, name)
	data := req.upload.data
	t := s.newTask(node, "imgcopy", "", req.user)
	if st.used()+int64(len(data)) > st.spec.Total {
		s.finish(t, fmt.Sprintf("failed to write '%s' - No space left on device", name), nil)
		return t.upid, nil
	}
	s.finish(t, "OK", func() {
		if st.ctime == nil {
			st.ctime = map[string]int64{}
		}
		st.volumes[volid] = data
		st.ctime[volid] = time.Now().Unix()
	})
	return t.upid, nil
}

// deleteVolume is DELETE .../content/{volume}; volume is a full volid or
// its part after "storage:".
func (s *Server) deleteVolume(req *request, node string, st *storage, volume string) (any, *apiError) {
	volid := volume
	if !strings.Contains(volid, ":") {
		volid = st.spec.Name + ":" + volid
	}
	if _, ok := st.volumes[volid]; !ok {
		return nil, fail(500, "volume '%s' does not exist", volid)
	}
	t := s.newTask(node, "imgdel", volid, req.user)
	s.finish(t, "OK", func() { delete(st.volumes, volid) })
	return t.upid, nil
}
