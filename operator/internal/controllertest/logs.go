package controllertest

import (
	"strings"
	"sync"

	"github.com/go-logr/logr/funcr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Logs keeps every line controller-runtime's logger writes, for the tests
// that assert what was logged, or that a secret never was.
type Logs struct {
	mu    sync.Mutex
	lines []string
}

// CaptureLogs makes controller-runtime's logger write every line, at every
// verbosity, into the Logs it returns. A suite calls it in TestMain, before
// anything logs.
func CaptureLogs() *Logs {
	l := &Logs{}
	logf.SetLogger(funcr.New(l.write, funcr.Options{Verbosity: 10}))
	return l
}

func (l *Logs) write(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

// Count is the number of lines holding every one of parts.
func (l *Logs) Count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if containsAll(line, parts) {
			n++
		}
	}
	return n
}

// String is every line so far, one per line.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
