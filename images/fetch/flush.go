package fetch

import (
	"os"
	"sync"
)

// flusher makes a file durable bit by bit while it is written. A disk
// with a volatile write cache (a VM's virtual disk is one: the host's page
// cache) holds what it was sent until a flush; left to the final fsync,
// 2 GiB took 0.5 to 1.3 s after the last byte here. Flushed in the
// background every so often, the disk writes while the network reads, and
// the final fsync has only the tail left. The flush also starts the
// kernel's writeback of the file's dirty pages, so nothing else needs to.
type flusher struct {
	f     *os.File
	every int64
	// flush is flushData; tests replace it.
	flush   func(*os.File) error
	pending int64
	// running holds a token while a flush runs: one at a time.
	running chan struct{}
	wg      sync.WaitGroup
	// err is the first background flush's failure. Linux reports a
	// writeback error to one fsync of an open file only, so the final
	// fsync may not see it again: wait returns it.
	err error
}

func newFlusher(f *os.File, every int64) *flusher {
	return &flusher{f: f, every: every, flush: flushData, running: make(chan struct{}, 1)}
}

// wrote counts n more bytes written and starts a flush once every bytes
// have been since the last one started; while one runs, the next write
// tries again.
func (fl *flusher) wrote(n int) {
	fl.pending += int64(n)
	if fl.pending < fl.every {
		return
	}
	select {
	case fl.running <- struct{}{}:
	default:
		return
	}
	fl.pending = 0
	fl.wg.Go(func() {
		if err := fl.flush(fl.f); err != nil && fl.err == nil {
			fl.err = err
		}
		<-fl.running
	})
}

// wait returns once no flush runs, with the first failure of any. The
// file must not be closed before.
func (fl *flusher) wait() error {
	fl.wg.Wait()
	return fl.err
}
