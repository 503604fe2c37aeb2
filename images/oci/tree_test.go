package oci

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A host path reached through symlinks lands in the image with the same
// symlinks, so it resolves there as it does here (merged /usr: /lib →
// usr/lib, then a versioned library behind its soname).
func TestAddHostPathKeepsSymlinks(t *testing.T) {
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "usr/lib/x"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "usr/lib/x/libfoo.so.1.2.3"), []byte("elf"), 0o644))
	must(t, os.Symlink("libfoo.so.1.2.3", filepath.Join(root, "usr/lib/x/libfoo.so.1")))
	must(t, os.Symlink("usr/lib", filepath.Join(root, "lib")))

	tree := NewTree()
	must(t, tree.AddHostPath(filepath.Join(root, "lib/x/libfoo.so.1")))

	want := map[string]string{
		root + "/lib":                       "symlink to usr/lib",
		root + "/usr/lib/x/libfoo.so.1":     "symlink to libfoo.so.1.2.3",
		root + "/usr/lib/x/libfoo.so.1.2.3": "file -rw-r--r-- from " + root + "/usr/lib/x/libfoo.so.1.2.3",
	}
	for p, d := range want {
		e, ok := tree.entries[p]
		if !ok {
			t.Errorf("%s: not in the tree", p)
			continue
		}
		if got := describe(e); got != d {
			t.Errorf("%s: %s, want %s", p, got, d)
		}
	}
	if e := tree.Lookup(root + "/lib/x/libfoo.so.1"); e == nil || e.Kind != File {
		t.Errorf("Lookup through the symlinks: %v, want the file", e)
	}
	// Adding it again (two binaries needing one library) is no conflict.
	must(t, tree.AddHostPath(filepath.Join(root, "lib/x/libfoo.so.1")))
}

func TestTreeConflicts(t *testing.T) {
	tree := NewTree()
	must(t, tree.AddFile("/etc/passwd", []byte("a"), 0o644))
	if err := tree.AddFile("/etc/passwd", []byte("b"), 0o644); err == nil || !strings.Contains(err.Error(), "/etc/passwd: added twice") {
		t.Errorf("a second, different /etc/passwd: %v, want an error naming the path", err)
	}
	if err := tree.AddFile("/etc/passwd/x", nil, 0o644); err == nil || !strings.Contains(err.Error(), "/etc/passwd: is a file") {
		t.Errorf("a file below a file: %v", err)
	}
	must(t, tree.AddSymlink("/lib", "usr/lib"))
	if err := tree.AddFile("/lib/libc.so.6", nil, 0o644); err == nil || !strings.Contains(err.Error(), "/lib: is a symlink") {
		t.Errorf("a file below a symlink: %v, want an error naming the symlink", err)
	}
	if err := tree.AddFile("tmp/x", nil, 0o644); err == nil || !strings.Contains(err.Error(), `"tmp/x"`) {
		t.Errorf("a relative path: %v", err)
	}
	// A directory made as a parent takes the attributes given later.
	must(t, tree.AddFile("/home/nonroot/.keep", nil, 0o644))
	must(t, tree.AddDir("/home/nonroot", 0o700, 65532, 65532))
	if e := tree.entries["/home/nonroot"]; e.Mode != 0o700 || e.UID != 65532 {
		t.Errorf("/home/nonroot: %s, want 0700 owned by 65532", describe(e))
	}
	if err := tree.AddDir("/home/nonroot", 0o755, 0, 0); err == nil {
		t.Error("/home/nonroot given twice with different attributes: no error")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
