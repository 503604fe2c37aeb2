package oci

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dpkg lists a file where its package shipped it; on merged /usr the same
// file is found at the other spelling.
func TestDebianOwner(t *testing.T) {
	info := filepath.Join(t.TempDir(), "info")
	must(t, os.Mkdir(info, 0o755))
	must(t, os.WriteFile(filepath.Join(info, "..", "status"), []byte(
		"Package: libfoo1\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.2-3\n\n"+
			"Package: libbar2\nArchitecture: all\nVersion: 2.0\nDescription: bar\n more\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(info, "libfoo1:amd64.list"), []byte("/.\n/lib\n/lib/x86_64-linux-gnu/libfoo.so.1\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(info, "libbar2.list"), []byte("/usr/lib/x86_64-linux-gnu/libbar.so.2\n"), 0o644))
	d, err := LoadDebianPackages(info)
	must(t, err)
	for p, want := range map[string]string{
		"/lib/x86_64-linux-gnu/libfoo.so.1":     "libfoo1",
		"/usr/lib/x86_64-linux-gnu/libfoo.so.1": "libfoo1",
		"/lib/x86_64-linux-gnu/libbar.so.2":     "libbar2",
		"/usr/local/bin/operator":               "",
	} {
		if got := d.Owner(p); got != want {
			t.Errorf("Owner(%s) = %q, want %q", p, got, want)
		}
	}
	pkgs := d.Packages([]string{"/usr/lib/x86_64-linux-gnu/libfoo.so.1", "/usr/local/bin/operator", "/lib/x86_64-linux-gnu/libbar.so.2", "/lib/x86_64-linux-gnu/libfoo.so.1"})
	if got, want := d.List(pkgs), "libbar2 2.0 all\nlibfoo1 1.2-3 amd64\n"; got != want {
		t.Errorf("List(%v) = %q, want %q", pkgs, got, want)
	}
	if _, err := LoadDebianPackages(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no dpkg file lists") {
		t.Errorf("an empty info dir: %v", err)
	}
}

// On this machine: the C library's copyright comes with it.
func TestDebianCopyrightOfLibc(t *testing.T) {
	if _, err := os.Stat("/var/lib/dpkg/info"); err != nil {
		t.Skip("not a Debian system")
	}
	d, err := LoadDebianPackages("/var/lib/dpkg/info")
	must(t, err)
	interp, libs, err := SharedLibraries("/bin/ls")
	must(t, err)
	c, err := d.CopyrightFiles(d.Packages(append([]string{interp, "/nonexistent/built-here"}, libs...)))
	must(t, err)
	if !strings.Contains(strings.Join(c, " "), "/usr/share/doc/libc6/copyright") {
		t.Errorf("copyright files of /bin/ls's libraries: %v, want libc6's among them", c)
	}
}
