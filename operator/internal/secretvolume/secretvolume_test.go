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
