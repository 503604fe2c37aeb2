package fetch

import (
	"os"
	"syscall"
)

// flushData is fdatasync: the data and the size, not the timestamps.
func flushData(f *os.File) error {
	return syscall.Fdatasync(int(f.Fd()))
}
