package fetch

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// chunkyReader serves data in reads of varying, mostly short lengths, as a
// socket does, then fails with err (io.EOF when nil).
type chunkyReader struct {
	data []byte
	rnd  *rand.Rand
	err  error
}

func (r *chunkyReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		return 0, io.EOF
	}
	n := min(len(p), len(r.data), 1+r.rnd.IntN(200_000))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

func testData(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*13 + i/509)
	}
	return b
}

// goroutinesIn counts the goroutines whose stack holds fn.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), fn)
}

// hashers counts hashing goroutines: stream returns only after its own
// has, so none may be left once it returned.
func hashers() int { return goroutinesIn("fetch.hashPieces") }

func TestStreamCopiesAndHashesEveryByteInOrder(t *testing.T) {
	for _, size := range []int{0, 1, pieceSize - 1, pieceSize, 5*pieceSize + 12345} {
		data := testData(size)
		var dst bytes.Buffer
		h := sha256.New()
		n, err := stream(&chunkyReader{data: data, rnd: rand.New(rand.NewPCG(1, uint64(size)))}, &dst, h)
		if err != nil || n != int64(size) {
			t.Fatalf("size %d: stream = %d, %v; want %d, nil", size, n, err, size)
		}
		if !bytes.Equal(dst.Bytes(), data) {
			t.Errorf("size %d: the copy differs from the source", size)
		}
		if want := sha256.Sum256(data); !bytes.Equal(h.Sum(nil), want[:]) {
			t.Errorf("size %d: the hash is not the source's", size)
		}
		if g := hashers(); g != 0 {
			t.Errorf("size %d: %d hashing goroutines left after stream returned", size, g)
		}
	}
}

func TestStreamReturnsTheReadError(t *testing.T) {
	// io.ErrUnexpectedEOF is how a body cut off short ends: it must not be
	// taken for the image's end (the checksum would then call a transient
	// failure a permanent mismatch).
	for _, readErr := range []error{io.ErrUnexpectedEOF, errors.New("connection reset")} {
		data := testData(2*pieceSize + 777)
		var dst bytes.Buffer
		n, err := stream(&chunkyReader{data: data, rnd: rand.New(rand.NewPCG(2, 2)), err: readErr}, &dst, sha256.New())
		if !errors.Is(err, readErr) {
			t.Errorf("stream over a reader failing with %q = %v", readErr, err)
		}
		if n != int64(dst.Len()) || n > int64(len(data)) {
			t.Errorf("stream reported %d bytes written; the destination got %d of %d read", n, dst.Len(), len(data))
		}
		if g := hashers(); g != 0 {
			t.Errorf("%d hashing goroutines left after a read error", g)
		}
	}
}

type failingWriter struct {
	okWrites int
	err      error
	writes   atomic.Int32
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if int(w.writes.Add(1)) > w.okWrites {
		return 0, w.err
	}
	return len(p), nil
}

func TestStreamStopsReadingAfterAWriteFails(t *testing.T) {
	// The source never ends; only the failed write can stop the copy.
	w := &failingWriter{okWrites: 2, err: errors.New("disk full")}
	n, err := stream(endless{}, w, sha256.New())
	if !errors.Is(err, w.err) {
		t.Errorf("stream = %v, want the write's error", err)
	}
	if n != 2*int64(pieceSize) {
		t.Errorf("stream reported %d bytes written, want the two pieces before the failure (%d)", n, 2*pieceSize)
	}
	if got := w.writes.Load(); got != 3 {
		t.Errorf("%d writes, want 3: none after the failed one", got)
	}
	if g := hashers(); g != 0 {
		t.Errorf("%d hashing goroutines left after a write error", g)
	}
}

type endless struct{}

func (endless) Read(p []byte) (int, error) { return len(p), nil }
