package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// testRepo is a git repository of two modules: b requires a, as the
// providers require the contract.
func testRepo(t *testing.T) *repo {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"versions.yaml": "modules:\n  a: v0.1.0\n  b: v0.1.0\n",
		"go.work":       "go 1.26.0\n\nuse (\n\t./a\n\t./b\n)\n\nreplace example.com/r/a v0.1.0 => ./a\n",
		"a/go.mod":      "module example.com/r/a\n\ngo 1.26.0\n",
		"a/a.go":        "package a\n\n// Name is a's name.\nconst Name = \"a\"\n",
		"b/go.mod":      "module example.com/r/b\n\ngo 1.26.0\n\nrequire example.com/r/a v0.1.0\n",
		"b/b.go":        "package b\n\nimport \"example.com/r/a\"\n\n// Name is b's name and a's.\nconst Name = \"b\" + a.Name\n",
		"CHANGELOG.md":  "# Changelog\n\n## Unreleased\n\n### a v0.1.0\n- a's change.\n\n### b\n- b's change.\n\n## Older\n- kept.\n",
	}
	for name, text := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := &repo{root: root}
	t.Setenv("GIT_AUTHOR_NAME", "t")
	t.Setenv("GIT_AUTHOR_EMAIL", "t@example.com")
	t.Setenv("GIT_COMMITTER_NAME", "t")
	t.Setenv("GIT_COMMITTER_EMAIL", "t@example.com")
	for _, args := range [][]string{{"init", "--quiet"}, {"add", "-A"}, {"commit", "--quiet", "-m", "start"}} {
		if _, err := r.git(args...); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func read(t *testing.T, r *repo, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(r.root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestTagReleasesAModuleAndMovesItsRequirements(t *testing.T) {
	r := testRepo(t)
	p, err := r.plan("v0.2.0", []string{"a"}, "2026-12-01")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.apply(p); err != nil {
		t.Fatal(err)
	}
	if got := read(t, r, "versions.yaml"); !strings.Contains(got, "  a: v0.2.0\n  b: v0.1.0\n") {
		t.Errorf("versions.yaml:\n%s", got)
	}
	if got := read(t, r, "b/go.mod"); !strings.Contains(got, "require example.com/r/a v0.2.0") {
		t.Errorf("b/go.mod still requires the old a:\n%s", got)
	}
	if got := read(t, r, "go.work"); !strings.Contains(got, "replace example.com/r/a v0.2.0 => ./a\n") || strings.Contains(got, "v0.1.0") {
		t.Errorf("go.work does not replace the new a alone:\n%s", got)
	}
	log := read(t, r, "CHANGELOG.md")
	want := "## Unreleased\n\n### b\n- b's change.\n\n## a v0.2.0 (2026-12-01)\n\n- a's change.\n\n## Older\n"
	if !strings.Contains(log, want) {
		t.Errorf("CHANGELOG.md:\n%s\nwant it to hold:\n%s", log, want)
	}
	if tags, _ := r.git("tag", "--list"); tags != "a/v0.2.0" {
		t.Errorf("tags %q, want a/v0.2.0", tags)
	}
	if status, _ := r.git("status", "--porcelain"); status != "" {
		t.Errorf("release left the tree unclean:\n%s", status)
	}
	// The next release must go above the tag.
	if _, err := r.plan("v0.2.0", []string{"a"}, "2026-12-02"); err == nil || !strings.Contains(err.Error(), "already tagged v0.2.0") {
		t.Errorf("releasing a at its tag again: %v", err)
	}
}

func TestTagRefusesBadInputBeforeChangingAnything(t *testing.T) {
	r := testRepo(t)
	for _, c := range []struct {
		version string
		modules []string
		want    string
	}{
		{"0.2.0", []string{"a"}, `-version "0.2.0"`},
		{"v0.2", []string{"a"}, `-version "v0.2"`},
		{"v2.0.0", []string{"a"}, "/v2"},
		{"v0.2.0", []string{"c"}, `"c" is not a module`},
		{"v0.2.0", nil, "-modules"},
	} {
		if _, err := r.plan(c.version, c.modules, "2026-12-01"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("plan(%q, %q): %v, want an error naming %s", c.version, c.modules, err, c.want)
		}
	}
	if err := os.WriteFile(filepath.Join(r.root, "a/a.go"), []byte("package a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.plan("v0.2.0", []string{"a"}, "2026-12-01"); err == nil || !strings.Contains(err.Error(), "not clean") {
		t.Errorf("plan on a dirty tree: %v", err)
	}
}

func TestDryRunPrintsAndChangesNothing(t *testing.T) {
	r := testRepo(t)
	t.Chdir(r.root)
	before, _ := r.git("rev-parse", "HEAD")
	out := captureStdout(t, func() {
		if err := run([]string{"tag", "-dry-run", "-version", "v0.3.0", "-modules", "all", "-date", "2026-12-01"}); err != nil {
			t.Fatal(err)
		}
	})
	for _, want := range []string{
		"versions.yaml: a v0.1.0 -> v0.3.0", "b/go.mod: require example.com/r/a v0.3.0 (was v0.1.0)",
		"go.work: replace example.com/r/a v0.3.0 => ./a (was v0.1.0)",
		"CHANGELOG.md: Unreleased's b entries -> ## b v0.3.0 (2026-12-01)", "tag: a/v0.3.0", "tag: b/v0.3.0", "dry run",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run printed:\n%s\nwithout %q", out, want)
		}
	}
	after, _ := r.git("rev-parse", "HEAD")
	status, _ := r.git("status", "--porcelain")
	tags, _ := r.git("tag", "--list")
	if after != before || status != "" || tags != "" {
		t.Errorf("dry run changed the repository: HEAD %s -> %s, status %q, tags %q", before, after, status, tags)
	}
}

// TestProxyServesWhatTheGoCommandFetches builds a module outside the
// repository against the proxy alone, as a downstream user would.
func TestProxyServesWhatTheGoCommandFetches(t *testing.T) {
	r := testRepo(t)
	p, err := r.plan("v0.2.0-rc.1", []string{"all"}, "2026-12-01")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.apply(p); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	served, err := r.proxy(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(served) != 2 {
		t.Fatalf("served %v, want a and b", served)
	}
	down := t.TempDir()
	if err := os.WriteFile(filepath.Join(down, "main.go"), []byte("package main\n\nimport \"example.com/r/b\"\n\nfunc main() { println(b.Name) }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// As a user outside the repository: no workspace, the proxy alone, an
	// empty module cache, go.sum filled by go get (the default -mod=readonly).
	env := append(os.Environ(), "GOWORK=off", "GOPROXY=file://"+out, "GOSUMDB=off", "GOFLAGS=",
		"GOTOOLCHAIN=local", "GOMODCACHE="+t.TempDir())
	goIn(t, down, env, "mod", "init", "example.com/down")
	goIn(t, down, env, "get", "example.com/r/b@v0.2.0-rc.1")
	goIn(t, down, env, "build", "-o", "down", ".")
	if graph, want := goIn(t, down, env, "list", "-m", "all"), "example.com/down\nexample.com/r/a v0.2.0-rc.1\nexample.com/r/b v0.2.0-rc.1\n"; graph != want {
		t.Errorf("downstream graph:\n%s\nwant:\n%s", graph, want)
	}
	if got, err := exec.CommandContext(t.Context(), filepath.Join(down, "down")).CombinedOutput(); err != nil || strings.TrimSpace(string(got)) != "ba" {
		t.Errorf("downstream program: %q, %v", got, err)
	}
	// Each zip passes x/mod's own checks of a module zip (paths, sizes, no
	// vendor directory, no nested module), as the go command's did.
	for _, m := range served {
		escaped, err := module.EscapePath(m.Path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := zip.CheckZip(m, filepath.Join(out, escaped, "@v", m.Version+".zip")); err != nil {
			t.Errorf("%s: %v", m, err)
		}
	}
}

// goIn runs the go command in dir with env and returns its output.
func goIn(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if e := (*exec.ExitError)(nil); errors.As(err, &e) {
			stderr = string(e.Stderr)
		}
		t.Fatalf("go %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}

func TestProxyRefusesAnUntaggedModule(t *testing.T) {
	r := testRepo(t)
	if _, err := r.proxy(t.TempDir()); err == nil || !strings.Contains(err.Error(), "a/v0.1.0 is not tagged") {
		t.Errorf("proxy of untagged modules: %v", err)
	}
}

func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = wr
	done := make(chan string)
	go func() {
		data, _ := io.ReadAll(rd)
		done <- string(data)
	}()
	f()
	os.Stdout = old
	_ = wr.Close()
	return <-done
}

// TestVersionsFileRoundTrips holds the repository's versions.yaml to what
// release writes, so that a release changes its versions and nothing else.
func TestVersionsFileRoundTrips(t *testing.T) {
	r := &repo{root: filepath.Join("..", "..")}
	v, err := r.versions()
	if err != nil {
		t.Fatal(err)
	}
	want := read(t, r, versionsFile)
	out := &repo{root: t.TempDir()}
	if err := out.writeVersions(v); err != nil {
		t.Fatal(err)
	}
	if got := read(t, out, versionsFile); got != want {
		t.Errorf("release would rewrite versions.yaml as:\n%s\nit is:\n%s", got, want)
	}
}
