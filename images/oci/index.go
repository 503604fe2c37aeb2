package oci

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Index makes one OCI image index of images built for different
// platforms (a multi-arch image): each manifest's descriptor names the
// platform its config says, so a runtime pulls the one for its machine.
// Two images of one platform are refused: a runtime would pick either.
func Index(images []v1.Image) (v1.ImageIndex, error) {
	if len(images) == 0 {
		return nil, errors.New("index: no image given")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[string]bool{}
	for i, img := range images {
		p, err := platformOf(img)
		if err != nil {
			return nil, fmt.Errorf("image %d: %w", i+1, err)
		}
		if seen[p.String()] {
			return nil, fmt.Errorf("image %d: a second image for %s", i+1, p)
		}
		seen[p.String()] = true
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}})
	}
	return idx, nil
}

func platformOf(img v1.Image) (*v1.Platform, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	if cf.OS == "" || cf.Architecture == "" {
		return nil, fmt.Errorf("its config names no platform (os %q, architecture %q)", cf.OS, cf.Architecture)
	}
	return &v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}, nil
}

// elfMachines are the ELF machines of the Go architectures an image may
// be built for.
var elfMachines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "arm": elf.EM_ARM, "386": elf.EM_386,
	"ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390, "riscv64": elf.EM_RISCV,
}

// CheckBinaries checks that in every image of idx the file at binary is
// an ELF program for the machine its platform names: an index whose arm64
// entry holds an amd64 binary would be pulled on arm64 nodes and fail to
// start there. It returns the platforms it checked.
func CheckBinaries(idx v1.ImageIndex, binary string) ([]string, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var checked []string
	for _, d := range m.Manifests {
		if d.Platform == nil {
			return checked, fmt.Errorf("manifest %s: no platform in the index", d.Digest)
		}
		want, ok := elfMachines[d.Platform.Architecture]
		if !ok {
			return checked, fmt.Errorf("manifest %s: architecture %q: no ELF machine known for it", d.Digest, d.Platform.Architecture)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return checked, err
		}
		data, err := fileIn(img, binary)
		if err != nil {
			return checked, fmt.Errorf("%s image: %w", d.Platform, err)
		}
		f, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			return checked, fmt.Errorf("%s image: %s is not an ELF file: %w", d.Platform, binary, err)
		}
		if f.Machine != want {
			return checked, fmt.Errorf("%s image: %s is built for %s, want %s", d.Platform, binary, f.Machine, want)
		}
		checked = append(checked, fmt.Sprintf("%s: %s %s", d.Platform, binary, f.Machine))
	}
	return checked, nil
}

// fileIn reads the regular file at p in img's filesystem.
func fileIn(img v1.Image, p string) ([]byte, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	want := strings.TrimPrefix(path.Clean(p), "/")
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("no file %s", p)
		}
		if err != nil {
			return nil, err
		}
		if strings.TrimPrefix(path.Clean(h.Name), "/") == want && h.Typeflag == tar.TypeReg {
			return io.ReadAll(tr)
		}
	}
}
