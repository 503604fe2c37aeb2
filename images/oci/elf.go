package oci

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// SharedLibraries returns what a dynamically linked ELF binary loads
// before main: its interpreter (the dynamic loader, PT_INTERP) and the
// closure of its DT_NEEDED libraries, each resolved as the loader resolves
// it on this machine — the requesting object's DT_RUNPATH (or DT_RPATH),
// the directories of /etc/ld.so.conf, then /lib and /usr/lib — and
// returned as the path found, symlinks and all (Tree.AddHostPath keeps
// them). A static binary needs nothing: ("", nil, nil).
//
// Libraries opened later with dlopen (NSS modules, SASL plugins) are not
// in DT_NEEDED; a caller that needs one adds it by name.
func SharedLibraries(binary string) (interp string, libs []string, err error) {
	f, err := elf.Open(binary)
	if err != nil {
		return "", nil, fmt.Errorf("binary %s: %w", binary, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return "", nil, fmt.Errorf("binary %s: interpreter: %w", binary, err)
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	if interp == "" {
		return "", nil, nil
	}
	r := resolver{class: f.Class, machine: f.Machine, system: systemDirs(), seen: map[string]bool{}}
	if err := r.walk(binary, f); err != nil {
		return "", nil, err
	}
	// libc needs the loader by its soname too: list it once.
	loader, _ := filepath.EvalSymlinks(interp)
	for _, l := range r.found {
		if real, _ := filepath.EvalSymlinks(l); real != loader || loader == "" {
			libs = append(libs, l)
		}
	}
	return interp, libs, nil
}

type resolver struct {
	class   elf.Class
	machine elf.Machine
	system  []string
	seen    map[string]bool // sonames resolved
	found   []string
}

func (r *resolver) walk(file string, f *elf.File) error {
	needed, err := f.DynString(elf.DT_NEEDED)
	if err != nil {
		return fmt.Errorf("%s: DT_NEEDED: %w", file, err)
	}
	dirs, err := r.searchPath(file, f)
	if err != nil {
		return err
	}
	for _, soname := range needed {
		if r.seen[soname] {
			continue
		}
		r.seen[soname] = true
		lib, lf, err := r.find(soname, dirs)
		if err != nil {
			return fmt.Errorf("%s needs %s: %w", file, soname, err)
		}
		r.found = append(r.found, lib)
		err = r.walk(lib, lf)
		lf.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// searchPath is where the loader looks for file's DT_NEEDED: DT_RUNPATH,
// or DT_RPATH when there is no RUNPATH, with $ORIGIN expanded, then the
// system directories.
func (r *resolver) searchPath(file string, f *elf.File) ([]string, error) {
	rpath, err := f.DynString(elf.DT_RUNPATH)
	if err != nil {
		return nil, err
	}
	if len(rpath) == 0 {
		if rpath, err = f.DynString(elf.DT_RPATH); err != nil {
			return nil, err
		}
	}
	origin := filepath.Dir(file)
	var dirs []string
	for _, rp := range rpath {
		for d := range strings.SplitSeq(rp, ":") {
			d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", origin), "$ORIGIN", origin)
			if d != "" {
				dirs = append(dirs, d)
			}
		}
	}
	return append(dirs, r.system...), nil
}

// find returns the first library named soname in dirs that is an ELF
// object of the binary's class and machine (a 32-bit library of the same
// name is skipped, as the loader skips it).
func (r *resolver) find(soname string, dirs []string) (string, *elf.File, error) {
	if strings.Contains(soname, "/") {
		dirs = []string{""}
	}
	for _, d := range dirs {
		p := path.Join(d, soname)
		lf, err := elf.Open(p)
		if err != nil {
			continue
		}
		if lf.Class == r.class && lf.Machine == r.machine {
			return p, lf, nil
		}
		lf.Close()
	}
	return "", nil, errors.New("not found in " + strings.Join(dirs, ":"))
}

// systemDirs are the directories /etc/ld.so.conf names (its includes
// followed), then the loader's built-in /lib and /usr/lib.
func systemDirs() []string {
	var dirs []string
	readLdConf("/etc/ld.so.conf", &dirs, 0)
	return append(dirs, "/lib", "/usr/lib")
}

func readLdConf(file string, dirs *[]string, depth int) {
	f, err := os.Open(file)
	if err != nil || depth > 8 {
		return
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		line, _, _ := strings.Cut(s.Text(), "#")
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
		case fields[0] == "include":
			for _, pattern := range fields[1:] {
				if !filepath.IsAbs(pattern) {
					pattern = filepath.Join(filepath.Dir(file), pattern)
				}
				matches, _ := filepath.Glob(pattern)
				for _, m := range matches {
					readLdConf(m, dirs, depth+1)
				}
			}
		case fields[0] == "hwcap":
		default:
			for _, d := range fields {
				*dirs = append(*dirs, strings.Trim(d, ",:"))
			}
		}
	}
}
