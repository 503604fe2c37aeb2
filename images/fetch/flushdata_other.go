//go:build !linux

package fetch

import "os"

// flushData is fsync where fdatasync is not at hand.
func flushData(f *os.File) error { return f.Sync() }
