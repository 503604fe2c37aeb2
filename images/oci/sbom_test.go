package oci

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// The SBOM of a Go binary lists exactly the modules `go version -m` lists
// for it (each as it was compiled in: a replaced module as its
// replacement), the toolchain's standard library, the binary's SHA-256
// and its GOARCH; and it is the same bytes on a second call.
func TestGoSBOMListsWhatGoVersionLists(t *testing.T) {
	// A binary with dependencies (a test binary records none): this
	// module's command, built as the images' binaries are.
	binary := filepath.Join(t.TempDir(), "oci-image")
	build := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-o", binary, "./cmd/oci-image")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	created := time.Unix(1700000000, 0)
	raw, err := GoSBOM(binary, "/usr/local/bin/x", created)
	if err != nil {
		t.Fatal(err)
	}
	again, err := GoSBOM(binary, "/usr/local/bin/x", created)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, again) {
		t.Error("two SBOMs of the same binary differ")
	}
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(raw), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatalf("the SBOM does not decode as CycloneDX: %v", err)
	}
	if bom.SpecVersion != cdx.SpecVersion1_6 || bom.Metadata == nil || bom.Metadata.Component == nil || bom.Components == nil {
		t.Fatalf("the SBOM lacks its spec version, subject or components: %s", raw)
	}

	out, err := exec.CommandContext(t.Context(), "go", "version", "-m", binary).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	var want []string
	goVersion := ""
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && strings.HasSuffix(f[0], ":"):
			goVersion = f[1]
		case len(f) >= 3 && f[0] == "dep":
			want = append(want, f[1]+"@"+f[2])
		case len(f) >= 3 && f[0] == "=>":
			want[len(want)-1] = f[1] + "@" + f[2]
		}
	}
	if len(want) == 0 {
		t.Fatalf("go version -m lists no modules for the test binary:\n%s", out)
	}
	want = append(want, "std@"+goVersion)
	var got []string
	for _, c := range *bom.Components {
		got = append(got, c.Name+"@"+c.Version)
		if c.PackageURL != "pkg:golang/"+c.Name+"@"+c.Version {
			t.Errorf("component %s has package URL %q", c.Name, c.PackageURL)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the SBOM lists %v, go version -m %v", got, want)
	}

	data, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	subject := bom.Metadata.Component
	if subject.Hashes == nil || len(*subject.Hashes) != 1 || (*subject.Hashes)[0].Value != hex.EncodeToString(sum[:]) {
		t.Errorf("the subject's hashes are %v, want the binary's SHA-256 %x", subject.Hashes, sum)
	}
	arch := ""
	if subject.Properties != nil {
		for _, p := range *subject.Properties {
			if p.Name == "cdx:gomod:build:env:GOARCH" {
				arch = p.Value
			}
		}
	}
	if arch != runtime.GOARCH {
		t.Errorf("the subject's GOARCH property is %q, want %s", arch, runtime.GOARCH)
	}
}
