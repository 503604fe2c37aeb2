package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/images/oci/internal/hello"
)

// layoutFor builds a static program for goarch and writes its image,
// saying platform linux/arch, with oci-image: as an OCI layout directory
// and as an OCI archive.
func layoutFor(t *testing.T, goarch, arch string) (layoutDir, archive string) {
	t.Helper()
	bin := hello.Build(t, goarch)
	dir := t.TempDir()
	lay := filepath.Join(dir, "layout")
	image := exec.CommandContext(t.Context(), "go", "run", "../oci-image", "-o", filepath.Join(dir, "hello.tar"), "-layout", lay, "-oci-archive", filepath.Join(dir, "hello.oci.tar"),
		"-tag", "hello:v1", "-binary", bin+"=/hello", "-platform", "linux/"+arch, "-source-date-epoch", "1700000000", "-copyright=false")
	if out, err := image.CombinedOutput(); err != nil {
		t.Fatalf("oci-image: %v\n%s", err, out)
	}
	return lay, filepath.Join(dir, "hello.oci.tar")
}

// Two images, amd64 (a layout) and arm64 (an archive), become one index in
// an archive and a layout; a mislabelled one is refused naming the image
// and the machine, before anything is written.
func TestIndexFromLayouts(t *testing.T) {
	amd, _ := layoutFor(t, "amd64", "amd64")
	_, arm := layoutFor(t, "arm64", "arm64")
	out := filepath.Join(t.TempDir(), "hello.oci.tar")
	lay := filepath.Join(t.TempDir(), "layout")
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-o", out, "-layout", lay, "-tag", "hello:v1", "-image", amd, "-image", arm, "-binary", "/hello"}, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "sha256:") || !strings.Contains(stderr.String(), "checked linux/arm64: /hello EM_AARCH64") {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() == 0 {
		t.Errorf("no archive written: %v", err)
	}
	if _, err := os.Stat(filepath.Join(lay, "index.json")); err != nil {
		t.Errorf("no layout written: %v", err)
	}

	wrong, _ := layoutFor(t, "amd64", "arm64")
	bad := filepath.Join(t.TempDir(), "bad.oci.tar")
	err := run([]string{"-o", bad, "-tag", "hello:v1", "-image", amd, "-image", wrong, "-binary", "/hello"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "-binary /hello: linux/arm64 image: /hello is built for EM_X86_64, want EM_AARCH64") {
		t.Errorf("an arm64 image of an amd64 binary: %v", err)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("a refused index was written: %v", err)
	}
}

// Bad input is refused naming the flag.
func TestFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-tag", "a:b", "-image", "x"}, "-o: required"},
		{[]string{"-o", "x.tar", "-tag", "a:b"}, "-image: none given"},
		{[]string{"-o", "x.tar", "-image", "x"}, "tag: none given"},
		{[]string{"-o", "x.tar", "-tag", "a:b", "-image", "/nonexistent"}, "-image /nonexistent:"},
	} {
		err := run(tc.args, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
