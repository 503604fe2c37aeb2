package fetch

import (
	"os"
	"syscall"
)

// startWriteback asks the kernel to start writing [off, off+n) of f to
// disk now, without waiting, so the final fsync has little left to do and
// the disk works while the network does.
func startWriteback(f *os.File, off, n int64) {
	_ = syscall.SyncFileRange(int(f.Fd()), off, n, 0x2 /* SYNC_FILE_RANGE_WRITE */)
}
