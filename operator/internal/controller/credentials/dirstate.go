package credentials

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// dirState sums up the files under dir as a reader of them sees them, so
// two calls return the same string exactly when what a reader would read
// changed: each entry's path, where a symlink resolves to, and a file's
// size and modification time (through symlinks). The kubelet updates a
// mounted Secret by writing a new hidden payload directory (`..<time>`)
// and swapping the `..data` link to it; entries named `..*` are its
// private steps and are left out, so a rotation is one change — the swap,
// which moves where every key resolves — however a poll falls between the
// steps. A file written in place changes its size or time. A missing
// directory is a state of its own, so its appearance is a change.
// Contents are never read: the state is safe to compare, not to show.
func dirState(dir string) string {
	var b strings.Builder
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if path != dir && strings.HasPrefix(filepath.Base(path), "..") {
			if d != nil && d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if err != nil {
			// Missing, or gone between listing and looking: a state like
			// any other, which the next look settles.
			fmt.Fprintf(&b, "%s !;", path)
			return nil //nolint:nilerr // a failed look is part of the state, not a failure
		}
		fmt.Fprintf(&b, "%s", path)
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := filepath.EvalSymlinks(path)
			if err != nil {
				target, _ = os.Readlink(path)
				target += " !"
			}
			fmt.Fprintf(&b, " -> %s", target)
		}
		if info, err := os.Stat(path); err == nil && !info.IsDir() {
			fmt.Fprintf(&b, " %d %d", info.Size(), info.ModTime().UnixNano())
		}
		b.WriteString(";")
		return nil
	})
	return b.String()
}
