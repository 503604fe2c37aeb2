package oci

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

var epoch = time.Unix(1700000000, 0)

// tiny lays out a small image's tree: a "binary", passwd for nonroot, /tmp.
// reverse adds the same things in the other order.
func tiny(t *testing.T, bin string, reverse bool) *Tree {
	t.Helper()
	tree := NewTree()
	add := []func() error{
		func() error { return tree.AddHostFile("/usr/local/bin/app", bin, 0o755) },
		func() error { return AddUser(tree, "nonroot", 65532, 65532) },
		func() error { return tree.AddDir("/tmp", 0o777|os.ModeSticky, 0, 0) },
		func() error { return tree.AddFile("/usr/share/doc/app/go-modules.txt", []byte("mods\n"), 0o644) },
	}
	if reverse {
		for i, j := 0, len(add)-1; i < j; i, j = i+1, j-1 {
			add[i], add[j] = add[j], add[i]
		}
	}
	for _, f := range add {
		must(t, f())
	}
	return tree
}

func tinyConfig() Config {
	return Config{
		Entrypoint: []string{"/usr/local/bin/app"},
		User:       "65532:65532",
		Labels:     map[string]string{"org.opencontainers.image.version": "v0.1.0", "egressproxies.io/providers": "vsphere"},
		Created:    epoch, OS: "linux", Architecture: "amd64",
	}
}

func hostBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "app")
	must(t, os.WriteFile(bin, []byte("\x7fELF not really"), 0o755))
	return bin
}

// The same inputs give the same image, whatever order they were added in
// and whenever the host files were written; another time gives another.
func TestBuildIsReproducible(t *testing.T) {
	bin := hostBinary(t)
	a, err := Build(tiny(t, bin, false), tinyConfig())
	must(t, err)
	must(t, os.Chtimes(bin, time.Now(), time.Now().Add(time.Hour)))
	b, err := Build(tiny(t, bin, true), tinyConfig())
	must(t, err)
	da, db := digest(t, a), digest(t, b)
	if da != db {
		t.Errorf("two builds of the same inputs: %s and %s", da, db)
	}
	later := tinyConfig()
	later.Created = epoch.Add(time.Second)
	c, err := Build(tiny(t, bin, false), later)
	must(t, err)
	if dc := digest(t, c); dc == da {
		t.Errorf("a build at another SOURCE_DATE_EPOCH has the same digest %s", dc)
	}
}

// The image written and read back runs as nonroot with its labels, holds
// the user in /etc/passwd, /tmp sticky and world-writable, and no shell.
func TestWrittenImage(t *testing.T) {
	img, err := Build(tiny(t, hostBinary(t), false), tinyConfig())
	must(t, err)
	tags, err := ParseTags([]string{"example:v1"})
	must(t, err)
	dir := t.TempDir()
	file := filepath.Join(dir, "image.tar")
	must(t, WriteTarball(file, img, tags))
	must(t, WriteLayout(filepath.Join(dir, "layout"), img, tags))

	back, err := tarball.ImageFromPath(file, &tags[0])
	must(t, err)
	// A docker archive holds the config and the layers, not the manifest:
	// the image ID (the config's digest) is what survives the trip.
	if id(t, back) != id(t, img) {
		t.Errorf("read back from the tarball: image ID %s, built %s", id(t, back), id(t, img))
	}
	idx, err := layout.ImageIndexFromPath(filepath.Join(dir, "layout"))
	must(t, err)
	im, err := idx.IndexManifest()
	must(t, err)
	if len(im.Manifests) != 1 || im.Manifests[0].Digest.String() != digest(t, img) ||
		im.Manifests[0].Annotations["io.containerd.image.name"] != "docker.io/library/example:v1" {
		t.Errorf("layout index: %+v, want one manifest %s named docker.io/library/example:v1", im.Manifests, digest(t, img))
	}

	cf, err := back.ConfigFile()
	must(t, err)
	if cf.Config.User != "65532:65532" || cf.Config.Labels["egressproxies.io/providers"] != "vsphere" ||
		!cf.Created.Equal(epoch) || cf.Config.Entrypoint[0] != "/usr/local/bin/app" {
		t.Errorf("config: user %q labels %v created %v entrypoint %v", cf.Config.User, cf.Config.Labels, cf.Created, cf.Config.Entrypoint)
	}

	files := contents(t, back)
	for _, shell := range []string{"bin/sh", "bin/bash", "usr/bin/sh", "bin/busybox"} {
		if _, ok := files[shell]; ok {
			t.Errorf("the image holds %s", shell)
		}
	}
	if h := files["tmp"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("/tmp: %+v, want mode 1777", h)
	}
	if h := files["home/nonroot"]; h == nil || h.Uid != 65532 || h.Mode != 0o700 {
		t.Errorf("/home/nonroot: %+v, want 0700 owned by 65532", h)
	}
	if h := files["usr/local/bin/app"]; h == nil || h.Mode != 0o755 || h.Uid != 0 || !h.ModTime.Equal(epoch) {
		t.Errorf("/usr/local/bin/app: %+v, want 0755, root, mtime %v", h, epoch)
	}
	if !strings.Contains(files["etc/passwd"].Linkname, "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd: %q, want the nonroot user", files["etc/passwd"].Linkname)
	}
}

func TestConfigRefused(t *testing.T) {
	tree := tiny(t, hostBinary(t), false)
	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.User = "nonroot" }, `user "nonroot"`},
		{func(c *Config) { c.Created = time.Time{} }, "created: not set"},
		{func(c *Config) { c.Entrypoint = []string{"/bin/sh"} }, `entrypoint "/bin/sh": not an executable file`},
		{func(c *Config) { c.Entrypoint = []string{"/usr/share/doc/app/go-modules.txt"} }, "not an executable file"},
		{func(c *Config) { c.Entrypoint = nil }, "entrypoint: empty"},
		{func(c *Config) { c.Env = []string{"NOEQUALS"} }, `env "NOEQUALS"`},
		{func(c *Config) { c.Architecture = "" }, `platform "linux"/""`},
	} {
		c := tinyConfig()
		tc.change(&c)
		if _, err := Build(tree, c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Build: %v, want an error containing %q", err, tc.want)
		}
	}
	if _, err := ParseTags([]string{"Bad Name:v1"}); err == nil || !strings.Contains(err.Error(), `tag "Bad Name:v1"`) {
		t.Errorf("ParseTags: %v, want an error naming the tag", err)
	}
}

func id(t *testing.T, img v1.Image) string {
	t.Helper()
	d, err := img.ConfigName()
	must(t, err)
	return d.String()
}

func digest(t *testing.T, img v1.Image) string {
	t.Helper()
	d, err := img.Digest()
	must(t, err)
	return d.String()
}

// contents reads the image's filesystem: each entry's header, and a
// regular file's content in Linkname (the header field is free for it).
func contents(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		must(t, err)
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			must(t, err)
			h.Linkname = string(b)
		}
		out[strings.TrimSuffix(h.Name, "/")] = h
	}
}
