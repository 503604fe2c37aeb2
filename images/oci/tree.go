package oci

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

// Kind is what an entry of a Tree is.
type Kind int

// The kinds of entries an image layer holds here: no devices, no hard
// links (a runtime makes /dev; a copy is as good as a link).
const (
	Dir Kind = iota
	File
	Symlink
)

func (k Kind) String() string {
	return [...]string{"directory", "file", "symlink"}[k]
}

// Entry is one path of the image's filesystem. A file's content is Data,
// or the host file Source read when the layer is written.
type Entry struct {
	Path     string
	Kind     Kind
	Mode     fs.FileMode // permission bits, and fs.ModeSticky/ModeSetuid/ModeSetgid
	UID, GID int
	Linkname string // a symlink's target, as the host spelled it
	Source   string
	Data     []byte
}

// Tree is the filesystem of a one-layer image, keyed by absolute path.
// Parent directories are made when a child is added (0755, root), so a
// caller names only what it means to put in.
type Tree struct {
	entries map[string]*Entry
}

// NewTree returns an empty tree.
func NewTree() *Tree { return &Tree{entries: map[string]*Entry{}} }

// Entries returns the entries sorted by path: the order the layer holds
// them in, parents before children.
func (t *Tree) Entries() []*Entry {
	out := make([]*Entry, 0, len(t.entries))
	for _, e := range t.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Lookup returns the entry at p, following symlinks inside the tree (not
// on the host) in every component, or nil.
func (t *Tree) Lookup(p string) *Entry {
	return t.lookup(p, 0)
}

func (t *Tree) lookup(p string, links int) *Entry {
	if links > 40 {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(path.Clean("/"+p), "/"), "/")
	cur := "/"
	for i, part := range parts {
		next := path.Join(cur, part)
		e, ok := t.entries[next]
		if !ok {
			return nil
		}
		if e.Kind == Symlink {
			target := e.Linkname
			if !path.IsAbs(target) {
				target = path.Join(cur, target)
			}
			return t.lookup(path.Join(append([]string{target}, parts[i+1:]...)...), links+1)
		}
		if i == len(parts)-1 {
			return e
		}
		cur = next
	}
	return nil
}

// AddDir adds a directory; adding one that exists with other attributes
// is an error (an implicit parent takes the explicit attributes).
func (t *Tree) AddDir(p string, mode fs.FileMode, uid, gid int) error {
	return t.add(&Entry{Path: p, Kind: Dir, Mode: mode, UID: uid, GID: gid})
}

// AddFile adds a file holding data, owned by root.
func (t *Tree) AddFile(p string, data []byte, mode fs.FileMode) error {
	return t.add(&Entry{Path: p, Kind: File, Mode: mode, Data: data})
}

// AddHostFile adds the host file src (symlinks followed) at p, owned by
// root. A mode of 0 keeps the host file's permission bits.
func (t *Tree) AddHostFile(p, src string, mode fs.FileMode) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file (%s)", src, fi.Mode().Type())
	}
	if mode == 0 {
		mode = fi.Mode().Perm()
	}
	return t.add(&Entry{Path: p, Kind: File, Mode: mode, Source: src})
}

// AddSymlink adds a symlink at p pointing at target.
func (t *Tree) AddSymlink(p, target string) error {
	return t.add(&Entry{Path: p, Kind: Symlink, Mode: 0o777, Linkname: target})
}

// AddHostPath adds the host path p at the same path in the image, keeping
// every symlink met on the way as a symlink, so that the path resolves in
// the image as it does here: /lib64/ld-linux-x86-64.so.2 on a merged-/usr
// Debian is /lib64 → usr/lib64, then a link to
// ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2, then the file.
func (t *Tree) AddHostPath(p string) error {
	return t.addHostPath(p, 0)
}

func (t *Tree) addHostPath(p string, links int) error {
	if !path.IsAbs(p) {
		return fmt.Errorf("host path %q: not absolute", p)
	}
	if links > 40 {
		return fmt.Errorf("host path %s: too many symlinks", p)
	}
	parts := strings.Split(strings.TrimPrefix(path.Clean(p), "/"), "/")
	cur := "/"
	for i, part := range parts {
		next := path.Join(cur, part)
		fi, err := os.Lstat(next)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(next)
			if err != nil {
				return err
			}
			if err := t.AddSymlink(next, target); err != nil {
				return err
			}
			resolved := target
			if !path.IsAbs(target) {
				resolved = path.Join(cur, target)
			}
			return t.addHostPath(path.Join(append([]string{resolved}, parts[i+1:]...)...), links+1)
		case i == len(parts)-1 && fi.Mode().IsRegular():
			return t.AddHostFile(next, next, 0)
		case i == len(parts)-1 && fi.IsDir():
			return t.ensureDir(next)
		case !fi.IsDir():
			return fmt.Errorf("host path %s: %s is a %s", p, next, fi.Mode().Type())
		}
		cur = next
	}
	return nil
}

func (t *Tree) add(e *Entry) error {
	if !path.IsAbs(e.Path) || path.Clean(e.Path) != e.Path || e.Path == "/" {
		return fmt.Errorf("image path %q: want an absolute, clean path below /", e.Path)
	}
	if err := t.ensureDir(path.Dir(e.Path)); err != nil {
		return err
	}
	if old, ok := t.entries[e.Path]; ok {
		if old.implicit() && e.Kind == Dir {
			t.entries[e.Path] = e
			return nil
		}
		if !same(old, e) {
			return fmt.Errorf("image path %s: added twice, as %s and as %s", e.Path, describe(old), describe(e))
		}
		return nil
	}
	t.entries[e.Path] = e
	return nil
}

// ensureDir makes p and its parents directories unless they are; a parent
// that is a file or a symlink is an error: the caller names the resolved
// path (AddHostPath does).
func (t *Tree) ensureDir(p string) error {
	if p == "/" {
		return nil
	}
	if e, ok := t.entries[p]; ok {
		if e.Kind != Dir {
			return fmt.Errorf("image path %s: is a %s, not a directory", p, describe(e))
		}
		return nil
	}
	if err := t.ensureDir(path.Dir(p)); err != nil {
		return err
	}
	t.entries[p] = &Entry{Path: p, Kind: Dir, Mode: implicitDirMode}
	return nil
}

// implicitDirMode marks a directory made as a parent: ModeIrregular is
// never a mode a caller gives, and is dropped when the layer is written.
const implicitDirMode = 0o755 | fs.ModeIrregular

func (e *Entry) implicit() bool { return e.Kind == Dir && e.Mode == implicitDirMode }

func same(a, b *Entry) bool {
	if a.implicit() && b.implicit() {
		return true
	}
	return a.Kind == b.Kind && a.Mode == b.Mode && a.UID == b.UID && a.GID == b.GID &&
		a.Linkname == b.Linkname && a.Source == b.Source && bytes.Equal(a.Data, b.Data)
}

func describe(e *Entry) string {
	switch {
	case e.Kind == Symlink:
		return "symlink to " + e.Linkname
	case e.Kind == File && e.Source != "":
		return fmt.Sprintf("file %s from %s", e.Mode.Perm(), e.Source)
	default:
		return fmt.Sprintf("%s %s %d:%d", e.Kind, e.Mode&^fs.ModeIrregular, e.UID, e.GID)
	}
}

// Size is the bytes a file holds (its host file's, if it has one).
func (e *Entry) Size() int64 {
	if e.Kind != File {
		return 0
	}
	if e.Source != "" {
		if fi, err := os.Stat(e.Source); err == nil {
			return fi.Size()
		}
	}
	return int64(len(e.Data))
}
