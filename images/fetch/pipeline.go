package fetch

import (
	"errors"
	"hash"
	"io"
	"sync"
)

// Hashing costs about as much CPU as reading the socket and writing the
// file together, so it runs on a goroutine of its own, fed through a ring
// of buffers: piece k+1 is read and written while piece k, and up to the
// ring's size behind it, is hashed. Read and write stay on one goroutine:
// the data is still in that core's cache when it is written, and a failed
// write leaves no read in flight. The ring bounds memory at
// pieces*pieceSize whatever the image's size.
const (
	pieceSize = 1 << 20
	pieces    = 4
)

// stream copies src into dst through h and returns the bytes written and
// the first error. It returns only once the hashing goroutine has, so h
// holds every byte read when it returns nil.
func stream(src io.Reader, dst io.Writer, h hash.Hash) (int64, error) {
	free := make(chan []byte, pieces)
	for range pieces {
		free <- make([]byte, pieceSize)
	}
	// Every buffer is in free, in toHash or in a goroutine's hands, and
	// each channel holds them all: no send blocks.
	toHash := make(chan []byte, pieces)
	var wg sync.WaitGroup
	wg.Go(func() { hashPieces(h, toHash, free) })
	defer wg.Wait()
	defer close(toHash)

	var written int64
	for {
		buf := <-free
		n, readErr := fill(src, buf)
		if n > 0 {
			// Hashing only reads buf: it runs beside the write.
			toHash <- buf[:n]
			w, err := dst.Write(buf[:n])
			written += int64(w)
			if err == nil && w < n {
				err = io.ErrShortWrite
			}
			if err != nil {
				return written, err
			}
		}
		if errors.Is(readErr, io.EOF) {
			return written, nil
		}
		if readErr != nil {
			return written, readErr
		}
	}
}

// hashPieces hashes each piece in order and hands its buffer back.
func hashPieces(h hash.Hash, toHash <-chan []byte, free chan<- []byte) {
	for buf := range toHash {
		h.Write(buf)
		free <- buf[:cap(buf)]
	}
}

// fill reads until buf is full, so that pieces are whole and writes few.
// Unlike io.ReadFull it keeps src's own error: a body cut off short is
// io.ErrUnexpectedEOF, which must not pass for the end of the image.
func fill(src io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := src.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
