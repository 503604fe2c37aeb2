package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// plan is one release: what tag computes, prints and, unless a dry run,
// does.
type plan struct {
	version string
	date    string
	modules []string          // directories released
	was     map[string]string // their versions before
	paths   map[string]string // every module's path, by directory
	require []requireChange
	replace []replaceChange
	all     versions // versions.yaml after the release
}

// replaceChange is go.work's replacement of a released module by its
// directory, moved to the new version: the workspace needs one at the
// version the modules require, or the go command fetches that version's
// go.mod.
type replaceChange struct {
	path, was, dir string
}

// requireChange is a requirement on a released module moved to its new
// version in another module's go.mod.
type requireChange struct {
	dir, path, was string
}

func (r *repo) plan(version string, modules []string, date string) (*plan, error) {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return nil, fmt.Errorf("-version %q: not a full semantic version vX.Y.Z[-pre]", version)
	}
	if m := semver.Major(version); m != "v0" && m != "v1" {
		return nil, fmt.Errorf("-version %s: a major version past v1 needs module paths ending in /%s (docs/releasing.md)", version, m)
	}
	if status, err := r.git("status", "--porcelain"); err != nil {
		return nil, err
	} else if status != "" {
		return nil, fmt.Errorf("the tree is not clean; commit or stash first:\n%s", status)
	}
	v, err := r.versions()
	if err != nil {
		return nil, err
	}
	if len(modules) == 1 && modules[0] == "all" {
		modules = v.dirs()
	}
	if len(modules) == 0 {
		return nil, fmt.Errorf(`-modules: name the module directories to release (%s), or "all"`, strings.Join(v.dirs(), ","))
	}
	slices.Sort(modules)
	modules = slices.Compact(modules)
	paths, err := r.modulePaths(v)
	if err != nil {
		return nil, err
	}
	p := &plan{version: version, date: date, modules: modules, was: map[string]string{}, paths: paths,
		all: versions{Modules: map[string]string{}}}
	for dir, ver := range v.Modules {
		p.all.Modules[dir] = ver
	}
	for _, dir := range modules {
		if _, ok := v.Modules[dir]; !ok {
			return nil, fmt.Errorf("-modules: %q is not a module in %s (%s)", dir, versionsFile, strings.Join(v.dirs(), ","))
		}
		if err := r.checkAbove(dir, version); err != nil {
			return nil, err
		}
		p.was[dir] = v.Modules[dir]
		p.all.Modules[dir] = version
	}
	for _, dir := range v.dirs() {
		f, err := r.goMod(dir)
		if err != nil {
			return nil, err
		}
		for _, req := range f.Require {
			for _, released := range modules {
				if req.Mod.Path == paths[released] && req.Mod.Version != version {
					p.require = append(p.require, requireChange{dir: dir, path: req.Mod.Path, was: req.Mod.Version})
				}
			}
		}
	}
	work, err := r.goWork()
	if err != nil {
		return nil, err
	}
	for _, rep := range work.Replace {
		for _, released := range modules {
			if rep.Old.Path == paths[released] && rep.Old.Version != version {
				p.replace = append(p.replace, replaceChange{path: rep.Old.Path, was: rep.Old.Version, dir: rep.New.Path})
			}
		}
	}
	return p, nil
}

// checkAbove fails unless version is above every tag of the module in dir:
// Go takes the highest version as the latest, and a tag is never moved.
func (r *repo) checkAbove(dir, version string) error {
	tags, err := r.git("tag", "--list", dir+"/v*")
	if err != nil {
		return err
	}
	for tag := range strings.FieldsSeq(tags) {
		old := strings.TrimPrefix(tag, dir+"/")
		if semver.IsValid(old) && semver.Compare(version, old) <= 0 {
			return fmt.Errorf("-version %s: %s is already tagged %s; a release goes above it", version, dir, old)
		}
	}
	return nil
}

func (p *plan) tags() []string {
	tags := make([]string, len(p.modules))
	for i, dir := range p.modules {
		tags[i] = dir + "/" + p.version
	}
	return tags
}

func (p *plan) message() string {
	return fmt.Sprintf("release %s: %s", p.version, strings.Join(p.modules, ", "))
}

func (p *plan) describe() []string {
	var lines []string
	for _, dir := range p.modules {
		lines = append(lines, fmt.Sprintf("%s: %s %s -> %s", versionsFile, dir, p.was[dir], p.version))
	}
	for _, c := range p.require {
		lines = append(lines, fmt.Sprintf("%s/go.mod: require %s %s (was %s)", c.dir, c.path, p.version, c.was))
	}
	for _, c := range p.replace {
		lines = append(lines, fmt.Sprintf("go.work: replace %s %s => %s (was %s)", c.path, p.version, c.dir, c.was))
	}
	for _, dir := range p.modules {
		lines = append(lines, fmt.Sprintf("%s: Unreleased's %s entries -> ## %s", changelogFile, dir, sectionTitle(dir, p.version, p.date)))
	}
	lines = append(lines, "commit: "+p.message())
	for _, tag := range p.tags() {
		lines = append(lines, "tag: "+tag)
	}
	return lines
}

func (r *repo) apply(p *plan) error {
	if err := r.writeVersions(p.all); err != nil {
		return err
	}
	for _, c := range p.require {
		f, err := r.goMod(c.dir)
		if err != nil {
			return err
		}
		if err := f.AddRequire(c.path, p.version); err != nil {
			return err
		}
		if err := writeGoMod(filepath.Join(r.root, c.dir, "go.mod"), f); err != nil {
			return err
		}
	}
	if len(p.replace) > 0 {
		work, err := r.goWork()
		if err != nil {
			return err
		}
		for _, c := range p.replace {
			if err := work.DropReplace(c.path, c.was); err != nil {
				return err
			}
			if err := work.AddReplace(c.path, p.version, c.dir, ""); err != nil {
				return err
			}
		}
		work.Cleanup()
		if err := os.WriteFile(filepath.Join(r.root, "go.work"), modfile.Format(work.Syntax), 0o644); err != nil {
			return err
		}
	}
	path := filepath.Join(r.root, changelogFile)
	text, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	moved, err := release(string(text), p.modules, p.version, p.date)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(moved), 0o644); err != nil {
		return err
	}
	if _, err := r.git("commit", "--quiet", "--all", "--message", p.message()); err != nil {
		return err
	}
	for _, tag := range p.tags() {
		if _, err := r.git("tag", "--annotate", "--message", tag, tag); err != nil {
			return err
		}
	}
	fmt.Printf("released; publish with: git push origin HEAD %s\n", strings.Join(p.tags(), " "))
	return nil
}

func writeGoMod(path string, f *modfile.File) error {
	f.Cleanup()
	data, err := f.Format()
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
