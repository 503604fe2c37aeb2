package fetch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// image is a test image and its catalogue entry, served from loopback.
type image struct {
	data  []byte
	entry Entry
	// hits counts images served whole: a racing process's request that is
	// closed before its body is read is not a download.
	hits atomic.Int32
	// cutAt, when > 0, makes the server promise the whole image and hang
	// up after cutAt bytes.
	cutAt atomic.Int64
	// stall, when set, makes the server send half and wait for it.
	stall chan struct{}
}

func serveImage(t *testing.T, size int) *image {
	t.Helper()
	img := &image{data: make([]byte, size)}
	for i := range img.data {
		img.data[i] = byte(i*7 + i/251)
	}
	sum := sha256.Sum256(img.data)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(img.data)))
		if cut := img.cutAt.Load(); cut > 0 {
			_, _ = w.Write(img.data[:cut])
			panic(http.ErrAbortHandler) // drop the connection mid-body
		}
		if img.stall != nil {
			_, _ = w.Write(img.data[:len(img.data)/2])
			w.(http.Flusher).Flush()
			select {
			case <-img.stall:
			case <-r.Context().Done():
			}
			return
		}
		if _, err := w.Write(img.data); err == nil {
			img.hits.Add(1)
		}
	}))
	t.Cleanup(srv.Close)
	img.entry = Entry{URL: srv.URL + "/debian-12-proxy.qcow2?token=secret-token", SHA256: hex.EncodeToString(sum[:]), Format: "qcow2"}
	return img
}

// files lists what the destination directory holds.
func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestEnsureFetchesOnceAndVerifies(t *testing.T) {
	img := serveImage(t, 1<<20)
	dest := DirDestination{Dir: t.TempDir()}
	f := &Fetcher{}
	for range 2 {
		if err := f.Ensure(context.Background(), dest, "debian-12", img.entry); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(filepath.Join(dest.Dir, "debian-12"))
	if err != nil || !bytes.Equal(got, img.data) {
		t.Fatalf("the copy differs from the image (%v)", err)
	}
	if n := img.hits.Load(); n != 1 {
		t.Errorf("%d downloads, want 1: a complete copy is not fetched again", n)
	}
}

func TestCutOffTransferIsRedoneAndNeverUsed(t *testing.T) {
	img := serveImage(t, 1<<20)
	img.cutAt.Store(300_000)
	dest := DirDestination{Dir: t.TempDir()}
	f := &Fetcher{}
	err := f.Ensure(context.Background(), dest, "debian-12", img.entry)
	if err == nil {
		t.Fatal("a cut-off transfer succeeded")
	}
	if contract.ClassOf(err) != contract.ClassTransient {
		t.Errorf("a cut-off transfer is %s, want transient: %v", contract.ClassOf(err), err)
	}
	if done, _ := dest.Complete(context.Background(), "debian-12"); done || len(files(t, dest.Dir)) != 0 {
		t.Fatalf("after a cut-off transfer the destination holds %v", files(t, dest.Dir))
	}
	img.cutAt.Store(0)
	if err := f.Ensure(context.Background(), dest, "debian-12", img.entry); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dest.Dir, "debian-12")); !bytes.Equal(got, img.data) {
		t.Error("the redone copy differs from the image")
	}
}

func TestChecksumMismatchLeavesNothing(t *testing.T) {
	img := serveImage(t, 64<<10)
	entry := img.entry
	entry.SHA256 = hex.EncodeToString(make([]byte, 32))
	dest := DirDestination{Dir: t.TempDir()}
	err := (&Fetcher{}).Ensure(context.Background(), dest, "debian-12", entry)
	if !errors.Is(err, contract.ErrPermanent) {
		t.Fatalf("checksum mismatch = %v, want ErrPermanent", err)
	}
	if names := files(t, dest.Dir); len(names) != 0 {
		t.Errorf("after a mismatch the destination holds %v", names)
	}
}

func TestRacingFetchesDownloadOnce(t *testing.T) {
	// Larger than loopback's socket buffers, so a request closed unread is
	// not served whole.
	img := serveImage(t, 32<<20)
	dest := DirDestination{Dir: t.TempDir()}
	// Two Fetchers are two operator processes; each runs three Creates.
	fetchers := []*Fetcher{{PollInterval: 20 * time.Millisecond}, {PollInterval: 20 * time.Millisecond}}
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for _, f := range fetchers {
		for range 3 {
			wg.Go(func() { errs <- f.Ensure(context.Background(), dest, "debian-12", img.entry) })
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := img.hits.Load(); n != 1 {
		t.Errorf("%d downloads for 6 racing Creates in 2 processes, want 1", n)
	}
}

func TestCancellationReturnsPromptlyAndLeavesNothingComplete(t *testing.T) {
	img := serveImage(t, 1<<20)
	img.stall = make(chan struct{})
	defer close(img.stall)
	dest := DirDestination{Dir: t.TempDir()}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	err := (&Fetcher{}).Ensure(ctx, dest, "debian-12", img.entry)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled fetch = %v, want context.Canceled", err)
	}
	if elapsed := time.Since(start); elapsed > time.Second+100*time.Millisecond {
		t.Errorf("returned %s after the start, want within 1 s of the cancel", elapsed)
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(files(t, dest.Dir)) != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // the shared copy discards its partial as it unwinds
	}
	if done, _ := dest.Complete(context.Background(), "debian-12"); done || len(files(t, dest.Dir)) != 0 {
		t.Errorf("after cancellation the destination holds %v", files(t, dest.Dir))
	}
}

func TestStalePartialIsTakenOver(t *testing.T) {
	img := serveImage(t, 64<<10)
	dest := DirDestination{Dir: t.TempDir(), StaleAfter: time.Minute}
	partial := filepath.Join(dest.Dir, "debian-12.partial")
	if err := os.WriteFile(partial, []byte("left by a dead writer"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := dest.Begin(context.Background(), "debian-12", -1); !errors.Is(err, ErrInProgress) {
		t.Fatalf("Begin over a fresh partial = %v, want ErrInProgress", err)
	}
	old := time.Now().Add(-2 * time.Minute)
	if err := os.Chtimes(partial, old, old); err != nil {
		t.Fatal(err)
	}
	if err := (&Fetcher{}).Ensure(context.Background(), dest, "debian-12", img.entry); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dest.Dir, "debian-12")); !bytes.Equal(got, img.data) {
		t.Error("the copy differs from the image")
	}
}

func TestErrorsNeverShowTheURLsToken(t *testing.T) {
	img := serveImage(t, 1024)
	img.cutAt.Store(10)
	err := (&Fetcher{}).Ensure(context.Background(), DirDestination{Dir: t.TempDir()}, "debian-12", img.entry)
	if err == nil || bytes.Contains([]byte(err.Error()), []byte("secret-token")) {
		t.Errorf("error %v", err)
	}
	bad := img.entry
	bad.SHA256 = "abc"
	if err := bad.Validate(); !errors.Is(err, contract.ErrPermanent) {
		t.Errorf("invalid entry: %v", err)
	}
}

// failingDestination's uploads fail their first write.
type failingDestination struct {
	DirDestination
	err error
}

func (d failingDestination) Begin(ctx context.Context, key string, size int64) (Upload, error) {
	up, err := d.DirDestination.Begin(ctx, key, size)
	if err != nil {
		return nil, err
	}
	return failingUpload{Upload: up, err: d.err}, nil
}

type failingUpload struct {
	Upload
	err error
}

func (u failingUpload) Write([]byte) (int, error) { return 0, u.err }

func TestFailedWriteStopsTheDownloadAndLeavesNothing(t *testing.T) {
	// The server sends two pieces' worth and stalls: the failed write must
	// end the copy, not a read waiting on the stalled network.
	img := serveImage(t, 4*pieceSize)
	img.stall = make(chan struct{})
	defer close(img.stall)
	writeErr := errors.New("no space left on device")
	dest := failingDestination{DirDestination: DirDestination{Dir: t.TempDir()}, err: writeErr}
	done := make(chan error, 1)
	go func() { done <- (&Fetcher{}).Ensure(context.Background(), dest, "debian-12", img.entry) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute): // a hang guard, not a measurement
		t.Fatal("Ensure still running a minute after the write failed: the download was not stopped")
	}
	if !errors.Is(err, writeErr) {
		t.Errorf("Ensure = %v, want the write's error", err)
	}
	if contract.ClassOf(err) != contract.ClassTransient {
		t.Errorf("a failed write is %s, want transient: %v", contract.ClassOf(err), err)
	}
	if names := files(t, dest.Dir); len(names) != 0 {
		t.Errorf("after a failed write the destination holds %v", names)
	}
}
