package credentials

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// dirState sums up the files under dir, so two calls return the same
// string exactly when nothing there changed: each entry's path, a
// symlink's target, and a file's size and modification time (through
// symlinks). The kubelet updates a mounted Secret by writing a new
// timestamped directory and swapping the `..data` link to it, which changes
// that link's target; a file written in place changes its size or time. A
// missing directory is a state of its own, so its appearance is a change.
// Contents are never read: the state is safe to compare, not to show.
func dirState(dir string) string {
	var b strings.Builder
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			// Missing, or gone between listing and looking (the kubelet
			// removes the old payload directory after a swap): a state like
			// any other, which the next look settles.
			fmt.Fprintf(&b, "%s !;", path)
			return nil //nolint:nilerr // a failed look is part of the state, not a failure
		}
		fmt.Fprintf(&b, "%s", path)
		if d.Type()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(path)
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
