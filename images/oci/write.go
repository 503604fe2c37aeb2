package oci

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ParseTags checks image references ("egress-proxies-operator:v0.1.0")
// before anything is built, naming the one refused.
func ParseTags(tags []string) ([]name.Tag, error) {
	if len(tags) == 0 {
		return nil, fmt.Errorf("tag: none given; an imported image without a name cannot be run by name")
	}
	out := make([]name.Tag, 0, len(tags))
	for _, s := range tags {
		tag, err := name.NewTag(s)
		if err != nil {
			return nil, fmt.Errorf("tag %q: %w", s, err)
		}
		out = append(out, tag)
	}
	return out, nil
}

// WriteTarball writes the image as a docker-archive tarball (manifest.json
// naming the tags): what `ctr images import`, `docker load` and
// `podman load` all read.
func WriteTarball(file string, img v1.Image, tags []name.Tag) error {
	refs := make(map[name.Reference]v1.Image, len(tags))
	for _, t := range tags {
		refs[t] = img
	}
	return tarball.MultiRefWriteToFile(file, refs)
}

// WriteLayout writes the image as an OCI image layout directory (replacing
// one there), one index entry per tag, each annotated with the tag
// (org.opencontainers.image.ref.name) and with the full name containerd
// reads when the layout is imported as a tar (io.containerd.image.name).
func WriteLayout(dir string, img v1.Image, tags []name.Tag) error {
	return writeLayout(dir, tags, func(p layout.Path, o layout.Option) error { return p.AppendImage(img, o) })
}

// WriteIndexLayout is WriteLayout for an image index (Index): the tags
// name the index, and a runtime picks its platform's image from it.
func WriteIndexLayout(dir string, idx v1.ImageIndex, tags []name.Tag) error {
	return writeLayout(dir, tags, func(p layout.Path, o layout.Option) error { return p.AppendIndex(idx, o) })
}

func writeLayout(dir string, tags []name.Tag, add func(layout.Path, layout.Option) error) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	for _, t := range tags {
		if err := add(p, layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": t.TagStr(),
			"io.containerd.image.name":          containerdName(t),
		})); err != nil {
			return err
		}
	}
	return nil
}

// containerdName is the name containerd stores an image under: Docker
// Hub's registry spelled docker.io, as containerd normalizes it (go-
// containerregistry spells it index.docker.io), so a Pod's image
// "egress-proxies-operator:v0.1.0" finds the imported image.
func containerdName(t name.Tag) string {
	reg := t.RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	return reg + "/" + t.RepositoryStr() + ":" + t.TagStr()
}

// WriteOCIArchive writes the image as an OCI image layout in a tar (what
// `ctr images import` reads keeping the manifest's digest: a docker
// archive it imports under a manifest of its own). The layout is written
// by WriteLayout to a temporary directory beside file and archived in
// name order with fixed times and owners, so the archive is reproducible
// too.
func WriteOCIArchive(file string, img v1.Image, tags []name.Tag) error {
	return archiveLayout(file, func(dir string) error { return WriteLayout(dir, img, tags) })
}

// WriteIndexArchive is WriteOCIArchive for an image index.
func WriteIndexArchive(file string, idx v1.ImageIndex, tags []name.Tag) error {
	return archiveLayout(file, func(dir string) error { return WriteIndexLayout(dir, idx, tags) })
}

func archiveLayout(file string, write func(dir string) error) error {
	dir, err := os.MkdirTemp(filepath.Dir(file), ".oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := write(dir); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := tarDir(f, dir); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// tarDir archives the regular files and directories under dir, sorted,
// with times and owners zeroed.
func tarDir(w io.Writer, dir string) error {
	var paths []string
	if err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if p != dir {
			paths = append(paths, p)
		}
		return err
	}); err != nil {
		return err
	}
	sort.Strings(paths)
	tw := tar.NewWriter(w)
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		switch {
		case fi.IsDir():
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
		case fi.Mode().IsRegular():
			h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		default:
			return fmt.Errorf("%s: unexpected %s in an image layout", p, fi.Mode().Type())
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			if err := copyFile(tw, p); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

func copyFile(w io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// ExtractArchive unpacks an OCI archive (WriteOCIArchive's) into dir: its
// directories and regular files only, none outside dir.
func ExtractArchive(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if !filepath.IsLocal(h.Name) {
			return fmt.Errorf("%s: entry %q is outside the archive's directory", file, h.Name)
		}
		p := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := writeFrom(p, tr); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: entry %q: unexpected type %q in an OCI archive", file, h.Name, h.Typeflag)
		}
	}
}

func writeFrom(p string, r io.Reader) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
