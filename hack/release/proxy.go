package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// proxy writes every module at its versions.yaml version, from its tag,
// into out in the layout `go help goproxy` describes: <path>/@v/list,
// <version>.info, <version>.mod and <version>.zip, the zip made by
// golang.org/x/mod/zip from the tagged tree as the go command makes one.
func (r *repo) proxy(out string) ([]module.Version, error) {
	v, err := r.versions()
	if err != nil {
		return nil, err
	}
	paths, err := r.modulePaths(v)
	if err != nil {
		return nil, err
	}
	var served []module.Version
	for _, dir := range v.dirs() {
		m := module.Version{Path: paths[dir], Version: v.Modules[dir]}
		if err := r.serve(out, dir, m); err != nil {
			return served, err
		}
		served = append(served, m)
	}
	return served, nil
}

func (r *repo) serve(out, dir string, m module.Version) error {
	tag := dir + "/" + m.Version
	if _, err := r.git("rev-parse", "--verify", "--quiet", tag+"^{commit}"); err != nil {
		return fmt.Errorf("%s is not tagged: release it first (release tag)", tag)
	}
	escaped, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	at := filepath.Join(out, escaped, "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	base := filepath.Join(at, m.Version)
	f, err := os.Create(base + ".zip")
	if err != nil {
		return err
	}
	if err := zip.CreateFromVCS(f, m, r.root, tag, dir); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	gomod, err := r.git("show", tag+":"+dir+"/go.mod")
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".mod", []byte(gomod+"\n"), 0o644); err != nil {
		return err
	}
	when, err := r.git("log", "-1", "--format=%cI", tag)
	if err != nil {
		return err
	}
	info, err := json.Marshal(struct{ Version, Time string }{m.Version, when})
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".info", info, 0o644); err != nil {
		return err
	}
	return addToList(filepath.Join(at, "list"), m.Version)
}

func addToList(path, version string) error {
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	list := strings.Fields(string(data))
	if !slices.Contains(list, version) {
		list = append(list, version)
	}
	return os.WriteFile(path, []byte(strings.Join(list, "\n")+"\n"), 0o644)
}
