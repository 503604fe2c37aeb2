package fetch

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
)

// beginFile starts a DirDestination upload flushed every 'every' bytes
// through flush.
func beginFile(t *testing.T, every int64, flush func(*os.File) error) (DirDestination, *fileUpload) {
	t.Helper()
	dest := DirDestination{Dir: t.TempDir()}
	up, err := dest.Begin(context.Background(), "debian-12", -1)
	if err != nil {
		t.Fatal(err)
	}
	u := up.(*fileUpload)
	u.flush.every, u.flush.flush = every, flush
	return dest, u
}

func flushers() int { return goroutinesIn("fetch.(*flusher).wrote.func") }

func TestBackgroundFlushFailureFailsTheCommit(t *testing.T) {
	ioErr := errors.New("input/output error")
	dest, u := beginFile(t, 1000, func(*os.File) error { return ioErr })
	if _, err := u.Write(make([]byte, 5000)); err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(context.Background()); !errors.Is(err, ioErr) {
		t.Fatalf("Commit after a failed background flush = %v, want its error", err)
	}
	if done, _ := dest.Complete(context.Background(), "debian-12"); done {
		t.Error("a copy whose flush failed was marked complete")
	}
	if err := u.Abort(context.Background()); err != nil {
		t.Error(err)
	}
	if names := files(t, dest.Dir); len(names) != 0 {
		t.Errorf("after the abort the destination holds %v", names)
	}
}

func TestFlushesRunOneAtATimeAndCommitWaitsForThem(t *testing.T) {
	var running, most, calls atomic.Int32
	release := make(chan struct{})
	flush := func(f *os.File) error {
		calls.Add(1)
		n := running.Add(1)
		if n > most.Load() {
			most.Store(n)
		}
		<-release
		running.Add(-1)
		return flushData(f)
	}
	dest, u := beginFile(t, 1<<10, flush)
	data := testData(3 * writeSlice)
	for range 8 { // each write is past the threshold, and the first flush still runs
		if _, err := u.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	if err := u.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c := calls.Load(); c != 1 {
		t.Errorf("%d flushes while the first was running, want 1", c)
	}
	if m := most.Load(); m != 1 {
		t.Errorf("%d flushes ran at once, want 1", m)
	}
	if g := flushers(); g != 0 {
		t.Errorf("%d flush goroutines left after Commit", g)
	}
	got, err := os.ReadFile(filepath.Join(dest.Dir, "debian-12"))
	if err != nil || !bytes.Equal(got, bytes.Repeat(data, 8)) {
		t.Errorf("the committed copy differs from what was written (%v)", err)
	}
}

func TestAbortWaitsForTheFlush(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var closedUnderIt atomic.Bool
	dest, u := beginFile(t, 1, func(f *os.File) error {
		close(started)
		<-release
		_, err := f.Stat()
		closedUnderIt.Store(err != nil)
		return nil
	})
	if _, err := u.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	<-started
	aborted := make(chan error, 1)
	go func() { aborted <- u.Abort(context.Background()) }()
	// Abort must not return while the flush runs. A correct Abort passes
	// however long this looks; a wrong one is caught when it is quick.
	for range 100 {
		select {
		case err := <-aborted:
			t.Fatalf("Abort returned (%v) while a flush was still running on the file", err)
		default:
			runtime.Gosched()
		}
	}
	close(release)
	if err := <-aborted; err != nil {
		t.Fatal(err)
	}
	if closedUnderIt.Load() {
		t.Error("the file was closed under the running flush")
	}
	if g := flushers(); g != 0 {
		t.Errorf("%d flush goroutines left after Abort", g)
	}
	if names := files(t, dest.Dir); len(names) != 0 {
		t.Errorf("after the abort the destination holds %v", names)
	}
}

// sliceRecorder records the length of each write.
type sliceRecorder struct {
	bytes.Buffer
	lens []int
}

func (r *sliceRecorder) Write(p []byte) (int, error) {
	r.lens = append(r.lens, len(p))
	return r.Buffer.Write(p)
}

func TestWritesGoToTheFileInSlices(t *testing.T) {
	data := testData(3*writeSlice + 5)
	var w sliceRecorder
	counted := 0
	n, err := writeInSlices(&w, data, func(k int) { counted += k })
	if err != nil || n != len(data) || counted != len(data) {
		t.Fatalf("writeInSlices = %d, %v, %d counted; want %d, nil, all counted", n, err, counted, len(data))
	}
	if !bytes.Equal(w.Bytes(), data) {
		t.Error("the slices differ from what was written")
	}
	for _, l := range w.lens {
		if l > writeSlice {
			t.Errorf("a write of %d bytes, want at most %d", l, writeSlice)
		}
	}
}
