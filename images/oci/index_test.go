package oci

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/egress-proxies/egress-proxies-operator/images/oci/internal/hello"
)

// helloImage is an image of bin at /hello, its config saying arch.
func helloImage(t *testing.T, bin, arch string) v1.Image {
	t.Helper()
	tree := NewTree()
	if err := tree.AddHostFile("/hello", bin, 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := Build(tree, Config{Entrypoint: []string{"/hello"}, Created: time.Unix(1700000000, 0), OS: "linux", Architecture: arch})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// An index of an amd64 and an arm64 image names both platforms, each
// image's binary is an ELF for its platform's machine, and the archive
// written reads back as the same index.
func TestIndexOfTwoPlatforms(t *testing.T) {
	idx, err := Index([]v1.Image{
		helloImage(t, hello.Build(t, "amd64"), "amd64"),
		helloImage(t, hello.Build(t, "arm64"), "arm64"),
	})
	if err != nil {
		t.Fatal(err)
	}
	checked, err := CheckBinaries(idx, "/hello")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"linux/amd64: /hello EM_X86_64", "linux/arm64: /hello EM_AARCH64"}
	if !slices.Equal(checked, want) {
		t.Errorf("checked %q, want %q", checked, want)
	}
	tags, err := ParseTags([]string{"hello:v1"})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "layout")
	if err := WriteIndexLayout(dir, idx, tags); err != nil {
		t.Fatal(err)
	}
	outer, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	om, err := outer.IndexManifest()
	if err != nil || len(om.Manifests) != 1 || om.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v1" {
		t.Fatalf("the layout's index: %+v, %v; want one entry, tagged v1", om, err)
	}
	read, err := outer.ImageIndex(om.Manifests[0].Digest)
	if err != nil {
		t.Fatalf("the tagged entry is not an index: %v", err)
	}
	m, err := read.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range m.Manifests {
		platforms = append(platforms, d.Platform.String())
	}
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("the written index holds %v", platforms)
	}
}

// An arm64 entry holding an amd64 binary is found, and so is a binary
// missing; two images of one platform are refused.
func TestIndexRefusesWhatARuntimeCannotUse(t *testing.T) {
	amd := hello.Build(t, "amd64")
	mislabelled, err := Index([]v1.Image{helloImage(t, amd, "arm64")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CheckBinaries(mislabelled, "/hello"); err == nil || !strings.Contains(err.Error(), "linux/arm64 image: /hello is built for EM_X86_64, want EM_AARCH64") {
		t.Errorf("an arm64 image of an amd64 binary: %v", err)
	}
	if _, err := CheckBinaries(mislabelled, "/absent"); err == nil || !strings.Contains(err.Error(), "no file /absent") {
		t.Errorf("a binary not in the image: %v", err)
	}
	if _, err := Index([]v1.Image{helloImage(t, amd, "amd64"), helloImage(t, amd, "amd64")}); err == nil || !strings.Contains(err.Error(), "image 2: a second image for linux/amd64") {
		t.Errorf("two amd64 images: %v", err)
	}
}
