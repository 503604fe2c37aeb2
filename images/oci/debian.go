package oci

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// DebianPackages maps host files to the Debian packages that installed
// them, read from dpkg's file lists (/var/lib/dpkg/info/*.list), so an
// image that copies a library can carry the package's copyright file
// beside it, as Debian's licences ask of a redistributed binary.
type DebianPackages struct {
	owner   map[string]string // path as dpkg lists it → package
	version map[string]string // package → "version arch", from dpkg's status
}

// LoadDebianPackages reads dpkg's file lists from infoDir
// (/var/lib/dpkg/info) and the installed versions from the status file
// beside it.
func LoadDebianPackages(infoDir string) (*DebianPackages, error) {
	lists, err := filepath.Glob(filepath.Join(infoDir, "*.list"))
	if err != nil {
		return nil, err
	}
	if len(lists) == 0 {
		return nil, fmt.Errorf("%s: no dpkg file lists (not a Debian system?)", infoDir)
	}
	d := &DebianPackages{owner: map[string]string{}, version: map[string]string{}}
	if err := d.readStatus(filepath.Join(filepath.Dir(filepath.Clean(infoDir)), "status")); err != nil {
		return nil, err
	}
	for _, l := range lists {
		// "libc6:amd64.list": multi-arch packages carry the architecture.
		pkg, _, _ := strings.Cut(strings.TrimSuffix(filepath.Base(l), ".list"), ":")
		f, err := os.Open(l)
		if err != nil {
			return nil, err
		}
		s := bufio.NewScanner(f)
		for s.Scan() {
			d.owner[s.Text()] = pkg
		}
		f.Close()
		if err := s.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", l, err)
		}
	}
	return d, nil
}

// readStatus reads the installed packages' versions from dpkg's status
// file: stanzas of "Field: value" lines separated by blank lines.
func (d *DebianPackages) readStatus(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	var pkg, version, arch string
	flush := func() {
		if pkg != "" && version != "" {
			d.version[pkg] = version + " " + arch
		}
		pkg, version, arch = "", "", ""
	}
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		k, v, _ := strings.Cut(s.Text(), ": ")
		switch k {
		case "":
			flush()
		case "Package":
			pkg = v
		case "Version":
			version = v
		case "Architecture":
			arch = v
		}
	}
	flush()
	if err := s.Err(); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// Owner returns the package that installed the host file p, or "". dpkg
// lists a file under the path its package shipped it at, which on a
// merged-/usr system may be /lib/… for a file found at /usr/lib/… (or the
// other way round), so both spellings are tried, after the path with its
// symlinks resolved.
func (d *DebianPackages) Owner(p string) string {
	candidates := []string{p}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		candidates = append(candidates, real)
	}
	for _, c := range candidates {
		if pkg, ok := d.owner[c]; ok {
			return pkg
		}
		for _, top := range []string{"/lib", "/lib64", "/bin", "/sbin"} {
			switch {
			case strings.HasPrefix(c, "/usr"+top+"/"):
				if pkg, ok := d.owner[strings.TrimPrefix(c, "/usr")]; ok {
					return pkg
				}
			case strings.HasPrefix(c, top+"/"):
				if pkg, ok := d.owner["/usr"+c]; ok {
					return pkg
				}
			}
		}
	}
	return ""
}

// Packages returns the packages that installed the host files, sorted,
// each once; a file no package installed (a binary built here) is skipped.
func (d *DebianPackages) Packages(files []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range files {
		if pkg := d.Owner(f); pkg != "" && !seen[pkg] {
			seen[pkg] = true
			out = append(out, pkg)
		}
	}
	sort.Strings(out)
	return out
}

// List is the packages with their versions and architectures, one
// "package version arch" a line: the Debian half of the image's SBOM, and
// what a rebuild must install to give the same bytes.
func (d *DebianPackages) List(pkgs []string) string {
	var b strings.Builder
	for _, p := range pkgs {
		fmt.Fprintf(&b, "%s %s\n", p, d.version[p])
	}
	return b.String()
}

// CopyrightFiles returns the copyright files of the packages, in order.
func (d *DebianPackages) CopyrightFiles(pkgs []string) ([]string, error) {
	out := make([]string, 0, len(pkgs))
	for _, pkg := range pkgs {
		c := path.Join("/usr/share/doc", pkg, "copyright")
		if _, err := os.Stat(c); err != nil {
			return nil, fmt.Errorf("package %s: %w", pkg, err)
		}
		out = append(out, c)
	}
	return out, nil
}
