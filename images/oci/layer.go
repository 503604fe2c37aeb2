package oci

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"
)

// layerTar lays the tree out as an uncompressed tar stream: entries in
// path order, every time mtime, owners numeric with no names, so the same
// tree gives the same bytes on any machine. The layer is built in memory:
// the images here are tens of megabytes.
func (t *Tree) layerTar(mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range t.Entries() {
		h := &tar.Header{
			Name:    strings.TrimPrefix(e.Path, "/"),
			Mode:    tarMode(e.Mode),
			Uid:     e.UID,
			Gid:     e.GID,
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		var body io.Reader
		switch e.Kind {
		case Dir:
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		case Symlink:
			h.Typeflag = tar.TypeSymlink
			h.Linkname = e.Linkname
		case File:
			h.Typeflag = tar.TypeReg
			data := e.Data
			if e.Source != "" {
				var err error
				if data, err = os.ReadFile(e.Source); err != nil {
					return nil, fmt.Errorf("image path %s: %w", e.Path, err)
				}
			}
			h.Size = int64(len(data))
			body = bytes.NewReader(data)
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("image path %s: %w", e.Path, err)
		}
		if body != nil {
			if _, err := io.Copy(tw, body); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarMode is the tar header's mode: permission bits plus the set-id and
// sticky bits (/tmp is 1777).
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}
