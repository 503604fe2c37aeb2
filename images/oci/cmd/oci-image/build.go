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
	var debian string
	if o.copyright || o.debianPackages != "" {
		if debian, err = addDebian(t, o, fromHost); err != nil {
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
	var sbom []byte
	if o.sbom != "" {
		if sbom, err = oci.GoSBOM(binHost, binImage, created); err != nil {
			return nil, fmt.Errorf("-sbom: %w", err)
		}
		if err := t.AddFile(o.sbom, sbom, 0o644); err != nil {
			return nil, fmt.Errorf("-sbom %q: %w", o.sbom, err)
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
	// The lists beside the tarball, to read without unpacking it.
	base := strings.TrimSuffix(o.out, ".tar")
	if modules != "" {
		if err := os.WriteFile(base+".go-modules.txt", []byte(modules), 0o644); err != nil {
			return nil, err
		}
	}
	if sbom != nil {
		if err := os.WriteFile(base+".cdx.json", sbom, 0o644); err != nil {
			return nil, err
		}
	}
	if o.debianPackages != "" {
		if err := os.WriteFile(base+".debian-packages.txt", []byte(debian), 0o644); err != nil {
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

// addDebian finds the Debian packages the host files came from, adds
// their copyright files (-copyright) and their list (-debian-packages),
// and returns the list.
func addDebian(t *oci.Tree, o *options, hostFiles []string) (string, error) {
	if len(hostFiles) == 0 {
		return "", nil
	}
	d, err := oci.LoadDebianPackages(o.dpkgInfo)
	if err != nil {
		return "", fmt.Errorf("-dpkg-info: %w", err)
	}
	pkgs := d.Packages(hostFiles)
	if o.copyright {
		copyrights, err := d.CopyrightFiles(pkgs)
		if err != nil {
			return "", fmt.Errorf("-copyright: %w", err)
		}
		for _, c := range copyrights {
			if err := t.AddHostPath(c); err != nil {
				return "", fmt.Errorf("-copyright: %w", err)
			}
		}
	}
	list := d.List(pkgs)
	if o.debianPackages != "" {
		if err := t.AddFile(o.debianPackages, []byte(list), 0o644); err != nil {
			return "", fmt.Errorf("-debian-packages %q: %w", o.debianPackages, err)
		}
	}
	return list, nil
}
