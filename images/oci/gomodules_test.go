package oci

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The module list is what `go version -m` prints, under the image's name
// for the binary.
func TestGoModulesIsGoVersionM(t *testing.T) {
	// The builder's own command: a Go binary with dependencies (a test
	// binary's build info lists none).
	exe := filepath.Join(t.TempDir(), "oci-image")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", exe, "./cmd/oci-image").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	got, err := GoModules(exe, "/usr/local/bin/app")
	must(t, err)
	out, err := exec.CommandContext(t.Context(), "go", "version", "-m", exe).Output()
	must(t, err)
	want := "/usr/local/bin/app:" + strings.SplitN(string(out), ":", 2)[1]
	if got != want {
		t.Errorf("GoModules:\n%s\ngo version -m:\n%s", got, want)
	}
	if !strings.Contains(got, "\tdep\tgithub.com/google/go-containerregistry\tv0.22.1\t") {
		t.Errorf("GoModules lacks go-containerregistry:\n%s", got)
	}
	if _, err := GoModules(filepath.Join(t.TempDir(), "missing"), "/x"); err == nil {
		t.Error("a missing binary: no error")
	}
}
