package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/mod/modfile"
)

// versionsFile names each module's directory and version.
const versionsFile = "versions.yaml"

const versionsHeader = `# The version of each Go module in this repository, tagged as
# <directory>/<version> (contract/v0.1.0). ` + "`make release`" + ` moves them and
# the requirements between the modules; docs/releasing.md says how. The
# contract's own version, the interface a provider implements, is
# contract.Version (docs/provider-contract.md), not this file's.
`

type versions struct {
	Modules map[string]string `yaml:"modules"`
}

// repo is the repository being released, at root.
type repo struct{ root string }

func repoRoot() (string, error) {
	out, err := exec.CommandContext(context.Background(), "git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("not in a git repository: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func (r *repo) versions() (versions, error) {
	var v versions
	data, err := os.ReadFile(filepath.Join(r.root, versionsFile))
	if err != nil {
		return v, err
	}
	if err := yaml.Unmarshal(data, &v); err != nil {
		return v, fmt.Errorf("%s: %w", versionsFile, err)
	}
	if len(v.Modules) == 0 {
		return v, fmt.Errorf("%s: no modules", versionsFile)
	}
	return v, nil
}

func (r *repo) writeVersions(v versions) error {
	var buf bytes.Buffer
	buf.WriteString(versionsHeader)
	buf.WriteString("modules:\n")
	for _, dir := range v.dirs() {
		fmt.Fprintf(&buf, "  %s: %s\n", dir, v.Modules[dir])
	}
	return os.WriteFile(filepath.Join(r.root, versionsFile), buf.Bytes(), 0o644)
}

// dirs is the modules' directories in order.
func (v versions) dirs() []string {
	dirs := make([]string, 0, len(v.Modules))
	for dir := range v.Modules {
		dirs = append(dirs, dir)
	}
	slices.Sort(dirs)
	return dirs
}

// goMod reads the go.mod of the module in dir.
func (r *repo) goMod(dir string) (*modfile.File, error) {
	path := filepath.Join(r.root, dir, "go.mod")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return modfile.Parse(path, data, nil)
}

// goWork reads the workspace's go.work.
func (r *repo) goWork() (*modfile.WorkFile, error) {
	path := filepath.Join(r.root, "go.work")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return modfile.ParseWork(path, data, nil)
}

// modulePaths maps each module's directory to its module path.
func (r *repo) modulePaths(v versions) (map[string]string, error) {
	paths := map[string]string{}
	for _, dir := range v.dirs() {
		f, err := r.goMod(dir)
		if err != nil {
			return nil, fmt.Errorf("%s lists %s: %w", versionsFile, dir, err)
		}
		paths[dir] = f.Module.Mod.Path
	}
	return paths, nil
}

func (r *repo) git(args ...string) (string, error) {
	cmd := exec.CommandContext(context.Background(), "git", args...)
	cmd.Dir = r.root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}
