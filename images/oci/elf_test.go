package oci

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"testing"
)

// The closure SharedLibraries finds is the one the loader loads: ldd
// (the loader itself, in list mode) is the independent reader.
func TestSharedLibrariesMatchLdd(t *testing.T) {
	bins := []string{"/bin/ls"}
	// A program linking libvirt, as the operator built with -tags libvirt
	// does: its closure is tens of libraries deep (gnutls, libssh, curl).
	if _, err := exec.LookPath("gcc"); err == nil {
		if _, err := os.Stat("/usr/include/libvirt/libvirt.h"); err == nil {
			src := filepath.Join(t.TempDir(), "v.c")
			must(t, os.WriteFile(src, []byte("#include <libvirt/libvirt.h>\nint main(void){return virGetVersion(0,0,0);}\n"), 0o644))
			bin := filepath.Join(filepath.Dir(src), "v")
			if out, err := exec.CommandContext(t.Context(), "gcc", "-o", bin, src, "-lvirt").CombinedOutput(); err != nil {
				t.Fatalf("gcc: %v\n%s", err, out)
			}
			bins = append(bins, bin)
		}
	}
	for _, bin := range bins {
		interp, libs, err := SharedLibraries(bin)
		must(t, err)
		got := realPaths(t, append([]string{interp}, libs...))
		want := realPaths(t, ldd(t, bin))
		if len(got) != len(want) {
			t.Errorf("%s: %d libraries, ldd lists %d:\n got %v\nwant %v", bin, len(got), len(want), got, want)
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: library %s, ldd has %s", bin, got[i], want[i])
			}
		}
	}
}

func TestStaticBinaryNeedsNothing(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "static")
	src := filepath.Join(filepath.Dir(bin), "main.go")
	must(t, os.WriteFile(src, []byte("package main\nfunc main() {}\n"), 0o644))
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	interp, libs, err := SharedLibraries(bin)
	if err != nil || interp != "" || len(libs) != 0 {
		t.Errorf("a static binary: interpreter %q, libraries %v, %v; want none", interp, libs, err)
	}
	if _, _, err := SharedLibraries(src); err == nil {
		t.Error("a Go source file as a binary: no error")
	}
}

var lddLine = regexp.MustCompile(`(?m)^\s*(?:\S+ => )?(/\S+) \(0x`)

func ldd(t *testing.T, bin string) []string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "ldd", bin).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", bin, err)
	}
	var libs []string
	for _, m := range lddLine.FindAllStringSubmatch(string(out), -1) {
		libs = append(libs, m[1])
	}
	return libs
}

func realPaths(t *testing.T, paths []string) []string {
	t.Helper()
	var out []string
	for _, p := range paths {
		r, err := filepath.EvalSymlinks(p)
		must(t, err)
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}
