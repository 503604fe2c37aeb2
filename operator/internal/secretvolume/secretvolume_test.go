package secretvolume

import (
	"os"
	"path/filepath"
	"testing"
)

// After each Write the keys read through their links as written, removed
// keys are gone, and only the current payload directory is left.
func TestWriteLeavesTheKubeletsLayout(t *testing.T) {
	dir := t.TempDir()
	for _, data := range []map[string]string{
		{"token": "one"},
		{"token": "two", "ca.pem": "pem"},
		{"ca.pem": "pem2"},
	} {
		if err := Write(dir, data); err != nil {
			t.Fatal(err)
		}
		for key, want := range data {
			if got, err := os.ReadFile(filepath.Join(dir, key)); err != nil || string(got) != want {
				t.Errorf("%s = %q, %v; want %q", key, got, err, want)
			}
			if target, err := os.Readlink(filepath.Join(dir, key)); err != nil || target != filepath.Join("..data", key) {
				t.Errorf("%s links to %q, %v; want ..data/%s", key, target, err, key)
			}
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		// The keys, ..data and one payload directory.
		if len(entries) != len(data)+2 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("after writing %d keys the directory holds %v", len(data), names)
		}
	}
}

// The payload is readable by any user, as the kubelet leaves it: its
// directory 0755 (atomic_writer.go's newTimestampDir chmods it so, "to
// allow 'group' and 'other' to recurse"), each file 0644 (a Secret
// volume's defaultMode). A non-root operator reads the Secret through it.
func TestWriteLeavesThePayloadReadableByAll(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, map[string]string{"token": "one"}); err != nil {
		t.Fatal(err)
	}
	payload, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{
		filepath.Join(dir, payload):          0o755 | os.ModeDir,
		filepath.Join(dir, payload, "token"): 0o644,
	} {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode() != want {
			t.Errorf("%s: mode %v, want %v", path, info.Mode(), want)
		}
	}
}
