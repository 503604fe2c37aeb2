package main

import (
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/egress-proxies/egress-proxies-operator/images/oci"
)

type result struct {
	digest              string
	entries, libraries  int
	layerSize, unpacked int64
}

// build reads every flag's value before it touches a file, then lays out
// the tree, builds the image and writes it.
func build(o *options) (*result, error) {
	created, err := o.created()
	if err != nil {
		return nil, err
	}
	goos, arch, err := o.osArch()
	if err != nil {
		return nil, err
	}
	tags, err := oci.ParseTags(o.tags)
	if err != nil {
		return nil, err
	}
	labels, err := keyValues("label", o.labels)
	if err != nil {
		return nil, err
	}
	var uid, gid int
	if o.user != "" {
		if uid, gid, err = ids(o.user); err != nil {
			return nil, fmt.Errorf("-user: %w", err)
		}
	}
	type copyFile struct {
		host, image string
		mode        fs.FileMode
	}
	var files []copyFile
	var binHost, binImage string
	if o.binary != "" {
		host, image, mode, err := hostToImage("binary", o.binary)
		if err != nil {
			return nil, err
		}
		if mode != 0 && mode&0o111 == 0 {
			return nil, fmt.Errorf("-binary %q: mode %s is not executable", o.binary, mode)
		}
		binHost, binImage = host, image
		files = append(files, copyFile{host, image, mode})
	}
	for _, f := range o.files {
		host, image, mode, err := hostToImage("file", f)
		if err != nil {
			return nil, err
		}
		files = append(files, copyFile{host, image, mode})
	}
	type dir struct {
		path     string
		mode     fs.FileMode
		uid, gid int
	}
	var dirs []dir
	for _, d := range o.dirs {
		p, mode, duid, dgid, err := dirSpec(d)
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, dir{p, mode, duid, dgid})
	}

	t := oci.NewTree()
	var fromHost []string // host files, for their copyright
	for _, f := range files {
		if err := t.AddHostFile(f.image, f.host, f.mode); err != nil {
			return nil, fmt.Errorf("%s=%s: %w", f.host, f.image, err)
		}
		fromHost = append(fromHost, f.host)
	}
	for _, d := range dirs {
		if err := t.AddDir(d.path, d.mode, d.uid, d.gid); err != nil {
			return nil, fmt.Errorf("-dir %s: %w", d.path, err)
		}
	}
	if o.userName != "" {
		if err := oci.AddUser(t, o.userName, uid, gid); err != nil {
			return nil, fmt.Errorf("-user-name: %w", err)
		}
	}
	res := &result{}
	if binHost != "" && !o.skipLibraryClosure {
		interp, libs, err := oci.SharedLibraries(binHost)
		if err != nil {
			return nil, fmt.Errorf("-binary %q: %w", o.binary, err)
		}
		if interp != "" {
			for _, p := range append([]string{interp}, libs...) {
				if err := t.AddHostPath(p); err != nil {
					return nil, fmt.Errorf("-binary %q: library %s: %w", o.binary, p, err)
				}
			}
			fromHost = append(fromHost, interp)
			fromHost = append(fromHost, libs...)
			res.libraries = len(libs)
		}
	}
	for _, p := range o.hostPaths {
		if err := t.AddHostPath(p); err != nil {
			return nil, fmt.Errorf("-host-path %q: %w", p, err)
		}
		fromHost = append(fromHost, p)
	}
	if o.copyright {
		if err := addCopyrights(t, o.dpkgInfo, fromHost); err != nil {
			return nil, err
		}
	}
	var modules string
	if o.goModules != "" {
		if modules, err = oci.GoModules(binHost, binImage); err != nil {
			return nil, fmt.Errorf("-go-modules: %w", err)
		}
		if err := t.AddFile(o.goModules, []byte(modules), 0o644); err != nil {
			return nil, fmt.Errorf("-go-modules %q: %w", o.goModules, err)
		}
	}
	entrypoint := []string(o.entrypoint)
	if len(entrypoint) == 0 {
		entrypoint = []string{binImage}
	}
	img, err := oci.Build(t, oci.Config{
		Entrypoint: entrypoint, Cmd: o.args, Env: o.env, User: o.user, WorkingDir: o.workdir,
		Labels: labels, Created: created, OS: goos, Architecture: arch,
	})
	if err != nil {
		return nil, err
	}
	if err := oci.WriteTarball(o.out, img, tags); err != nil {
		return nil, fmt.Errorf("-o %s: %w", o.out, err)
	}
	if o.layout != "" {
		if err := oci.WriteLayout(o.layout, img, tags); err != nil {
			return nil, fmt.Errorf("-layout %s: %w", o.layout, err)
		}
	}
	if o.ociArchive != "" {
		if err := oci.WriteOCIArchive(o.ociArchive, img, tags); err != nil {
			return nil, fmt.Errorf("-oci-archive %s: %w", o.ociArchive, err)
		}
	}
	if modules != "" {
		if err := os.WriteFile(strings.TrimSuffix(o.out, ".tar")+".go-modules.txt", []byte(modules), 0o644); err != nil {
			return nil, err
		}
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	if res.layerSize, err = layers[0].Size(); err != nil {
		return nil, err
	}
	res.digest, res.entries = digest.String(), len(t.Entries())
	for _, e := range t.Entries() {
		res.unpacked += e.Size()
	}
	return res, nil
}

// addCopyrights adds the copyright file of every Debian package that
// installed one of the host files.
func addCopyrights(t *oci.Tree, dpkgInfo string, hostFiles []string) error {
	if len(hostFiles) == 0 {
		return nil
	}
	pkgs, err := oci.LoadDebianPackages(dpkgInfo)
	if err != nil {
		return fmt.Errorf("-copyright: %w", err)
	}
	copyrights, err := pkgs.CopyrightFiles(hostFiles)
	if err != nil {
		return fmt.Errorf("-copyright: %w", err)
	}
	for _, c := range copyrights {
		if err := t.AddHostPath(c); err != nil {
			return fmt.Errorf("-copyright: %w", err)
		}
	}
	return nil
}
