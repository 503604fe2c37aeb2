// Package secretvolume updates a directory the way the kubelet updates a
// mounted Secret volume, for tests: envtest runs no kubelet, and the
// operator must notice the kubelet's way of writing, not a plain one.
package secretvolume

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Write makes dir hold exactly data (key → content), as the kubelet's
// atomic writer (k8s.io/kubernetes pkg/volume/util/atomic_writer.go) does:
// the payload goes into a new timestamped directory `..<time>.<random>`
// (0755, its files 0644: the kubelet's modes with the default defaultMode), a
// `..data_tmp` symlink to it is renamed over `..data` (the one atomic
// step), each key is a symlink `<key> -> ..data/<key>`, keys no longer in
// data lose theirs, and the previous timestamped directory is removed. dir
// must exist (the kubelet creates an optional Secret's volume empty).
func Write(dir string, data map[string]string) error {
	dataLink := filepath.Join(dir, "..data")
	old, err := os.Readlink(dataLink)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	ts, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return err
	}
	// Readable by all, whatever the umask, as the kubelet leaves it: a
	// non-root reader must get through (MkdirTemp makes it 0700).
	if err := os.Chmod(ts, 0o755); err != nil {
		return err
	}
	for key, content := range data {
		path := filepath.Join(ts, key)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
		if err := os.Chmod(path, 0o644); err != nil { // a Secret volume's defaultMode
			return err
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dataLink); err != nil {
		return err
	}
	for key := range data {
		link := filepath.Join(dir, key)
		if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
			if err := os.Symlink(filepath.Join("..data", key), link); err != nil {
				return err
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if _, keep := data[name]; !keep && name[0] != '.' && e.Type()&os.ModeSymlink != 0 {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			return fmt.Errorf("removing the previous payload %s: %w", old, err)
		}
	}
	return nil
}
