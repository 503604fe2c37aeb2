//go:build !linux

package fetch

import "os"

// startWriteback is a no-op where sync_file_range does not exist; the
// final fsync does all the work.
func startWriteback(*os.File, int64, int64) {}
