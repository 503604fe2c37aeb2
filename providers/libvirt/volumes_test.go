package libvirt

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// heldStream is a stream whose Send blocks until released, as a daemon
// that answers keepalives but does not read the stream (a stalled NFS
// pool, a full disk). It records every call that would touch a stream
// libvirt is still sending on, or one already freed: in C, each is a use
// after free.
type heldStream struct {
	mu                       sync.Mutex
	sending                  bool
	finished, aborted, freed bool
	misuse                   []string
	entered                  chan struct{}
	release                  chan struct{}
	finishErr                error
}

func newHeldStream() *heldStream {
	return &heldStream{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (s *heldStream) enter(call string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sending {
		s.misuse = append(s.misuse, call+" while a Send runs")
	}
	if s.freed {
		s.misuse = append(s.misuse, call+" after Free")
	}
}

func (s *heldStream) Send(p []byte) (int, error) {
	s.enter("Send")
	s.mu.Lock()
	s.sending = true
	s.mu.Unlock()
	s.entered <- struct{}{}
	<-s.release
	s.mu.Lock()
	s.sending = false
	s.mu.Unlock()
	return len(p), nil
}

func (s *heldStream) Finish() error {
	s.enter("Finish")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finished = true
	return s.finishErr
}

func (s *heldStream) Abort() error {
	s.enter("Abort")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.aborted = true
	return nil
}

func (s *heldStream) Free() error {
	s.enter("Free")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.freed = true
	return nil
}

func (s *heldStream) state() (aborted, freed bool, misuse []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.aborted, s.freed, append([]string(nil), s.misuse...)
}

// An upload that outlived its call timeout leaves its Write in Send; the
// caller's Abort must not abort or free the stream under it. The Write
// ends the stream when its Send returns.
func TestStreamEndsAfterItsLastSend(t *testing.T) {
	s := newHeldStream()
	w := &streamWriter{st: s}
	wrote := make(chan error, 1)
	go func() { _, err := w.Write([]byte("seed")); wrote <- err }()
	<-s.entered
	aborted := make(chan error, 1)
	go func() { aborted <- w.Abort() }()
	select {
	case err := <-aborted:
		if err != nil {
			t.Fatalf("Abort with a Send running = %v, want nil (the Write ends the stream)", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Abort waited for the Send it must not touch")
	}
	if a, f, misuse := s.state(); a || f || len(misuse) > 0 {
		t.Fatalf("while the Send runs: aborted %v, freed %v, misuse %q; want the stream untouched", a, f, misuse)
	}
	close(s.release)
	if err := <-wrote; err != nil {
		t.Fatalf("the held Write: %v", err)
	}
	if a, f, misuse := s.state(); !a || !f || len(misuse) > 0 {
		t.Fatalf("after the Send returned: aborted %v, freed %v, misuse %q; want aborted and freed by the Write, once", a, f, misuse)
	}
	if _, err := w.Write([]byte("more")); err == nil {
		t.Error("a Write after Abort succeeded")
	}
	if err := w.Finish(); err == nil {
		t.Error("a Finish after Abort succeeded")
	}
	if _, _, misuse := s.state(); len(misuse) > 0 {
		t.Errorf("calls after the end reached the stream: %q", misuse)
	}
}

func TestStreamAbortWithNothingInFlight(t *testing.T) {
	s := newHeldStream()
	w := &streamWriter{st: s}
	_ = w.Abort()
	_ = w.Abort()
	if a, f, misuse := s.state(); !a || !f || len(misuse) > 0 {
		t.Fatalf("aborted %v, freed %v, misuse %q; want aborted and freed at once, once", a, f, misuse)
	}
}

func TestStreamFinish(t *testing.T) {
	s := newHeldStream()
	w := &streamWriter{st: s}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	_ = w.Abort() // the caller's deferred clean-up after a success
	if a, f, misuse := s.state(); a || !f || len(misuse) > 0 {
		t.Fatalf("aborted %v, freed %v, misuse %q; want freed, not aborted", a, f, misuse)
	}

	failed := newHeldStream()
	failed.finishErr = errors.New("pool full")
	w = &streamWriter{st: failed}
	if err := w.Finish(); err == nil {
		t.Fatal("a failed Finish returned nil")
	}
	_ = w.Abort()
	if _, f, misuse := failed.state(); !f || len(misuse) > 0 {
		t.Fatalf("after a failed Finish and Abort: freed %v, misuse %q", f, misuse)
	}
}
