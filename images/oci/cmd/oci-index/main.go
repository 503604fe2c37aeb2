// Command oci-index joins images built for different platforms by
// oci-image (each written with -layout) into one multi-arch image: an OCI
// image index in an OCI archive, tagged, that a runtime pulls its
// machine's image from. With -binary it checks that every image's program
// is built for the machine its platform names. It prints the index's
// digest (docs/operator-image.md, "Release artifacts").
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/egress-proxies/egress-proxies-operator/images/oci"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "oci-index:", err)
		os.Exit(1)
	}
}

// list is a flag given once per value.
type list []string

func (l *list) String() string     { return strings.Join(*l, " ") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func run(args []string, stdout, stderr io.Writer) error {
	var out, layoutDir, binary string
	var tags, images list
	fs := flag.NewFlagSet("oci-index", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&out, "o", "", "Write the index as an OCI archive (an OCI image layout in a tar) here (required).")
	fs.StringVar(&layoutDir, "layout", "", "Also write the index as an OCI image layout in this directory (replaced).")
	fs.Var(&tags, "tag", "An image reference the archive names the index by, e.g. egress-proxies-operator:v0.1.0 (at least one; repeatable).")
	fs.Var(&images, "image", "An OCI archive (oci-image -oci-archive) or layout directory (-layout) holding one image, one per platform (repeatable).")
	fs.StringVar(&binary, "binary", "", "IMAGE path: check that in every image this file is an ELF program for the image's machine.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: every input is a flag", fs.Arg(0))
	}
	if out == "" {
		return fmt.Errorf("-o: required")
	}
	if len(images) == 0 {
		return fmt.Errorf("-image: none given; want one OCI image layout per platform")
	}
	refs, err := oci.ParseTags(tags)
	if err != nil {
		return err
	}
	// Archives are unpacked here; their images are read from it until
	// the index is written.
	tmp, err := os.MkdirTemp("", "oci-index-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var imgs []v1.Image
	for i, src := range images {
		img, err := onlyImage(src, filepath.Join(tmp, strconv.Itoa(i)))
		if err != nil {
			return fmt.Errorf("-image %s: %w", src, err)
		}
		imgs = append(imgs, img)
	}
	idx, err := oci.Index(imgs)
	if err != nil {
		return err
	}
	if binary != "" {
		checked, err := oci.CheckBinaries(idx, binary)
		if err != nil {
			return fmt.Errorf("-binary %s: %w", binary, err)
		}
		for _, c := range checked {
			fmt.Fprintln(stderr, "oci-index: checked", c)
		}
	}
	if err := oci.WriteIndexArchive(out, idx, refs); err != nil {
		return fmt.Errorf("-o %s: %w", out, err)
	}
	if layoutDir != "" {
		if err := oci.WriteIndexLayout(layoutDir, idx, refs); err != nil {
			return fmt.Errorf("-layout %s: %w", layoutDir, err)
		}
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, digest)
	return nil
}

// onlyImage is the image an oci-image layout or OCI archive holds (an
// archive unpacked into scratch): its entries (one per tag) must all be
// one image.
func onlyImage(src, scratch string) (v1.Image, error) {
	dir := src
	if fi, err := os.Stat(src); err == nil && fi.Mode().IsRegular() {
		if err := oci.ExtractArchive(src, scratch); err != nil {
			return nil, err
		}
		dir = scratch
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	ii, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := ii.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) == 0 {
		return nil, fmt.Errorf("no image in the layout")
	}
	first := m.Manifests[0].Digest
	for _, d := range m.Manifests[1:] {
		if d.Digest != first {
			return nil, fmt.Errorf("more than one image in the layout (%s, %s)", first, d.Digest)
		}
	}
	return ii.Image(first)
}
