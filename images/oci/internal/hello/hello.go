// Package hello builds the small static Go program the image tests put in
// their images, as the operator's pure-Go image holds one.
package hello

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Build compiles a static "hello" for linux/goarch ("" for this
// machine's) into a directory of the test's and returns its path.
func Build(t testing.TB, goarch string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\nfunc main() { println(\"hello\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hello")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-o", bin, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOOS=linux")
	if goarch != "" {
		cmd.Env = append(cmd.Env, "GOARCH="+goarch)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build for %q: %v\n%s", goarch, err, out)
	}
	return bin
}
