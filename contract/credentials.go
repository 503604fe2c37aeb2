package contract

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"
)

// SecretFile is a credential in a file mounted from a Secret (credentials:
// mounted-files, §7). Read returns its content and reads it again whenever
// the file changes, so a rotated Secret takes effect on the next call
// without a restart. Kubernetes rotates a mounted Secret by swapping a
// symlink; Read follows it.
type SecretFile struct {
	// Path is the file's path, e.g. /etc/egress-proxies/credentials/vsphere-password.
	Path string

	mu      sync.Mutex
	modTime time.Time
	size    int64
	value   string
}

// Read returns the credential with surrounding whitespace (the trailing
// newline editors add) removed. Its errors are a *CredentialError naming
// the path, never the content. A missing or empty file is transient: the
// Secret is not mounted yet, or not yet with this key, and the kubelet
// writes it without a restart once it exists. Any other failure (the path
// is a directory, the file is not readable to the operator) is
// ErrPermanent: only a change of the config or the Deployment fixes it.
func (f *SecretFile) Read() (string, error) {
	info, err := os.Stat(f.Path)
	if err != nil {
		return "", f.fail(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.value != "" && info.ModTime().Equal(f.modTime) && info.Size() == f.size {
		return f.value, nil
	}
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return "", f.fail(err)
	}
	value := strings.TrimSpace(string(data))
	if value == "" {
		return "", &CredentialError{Path: f.Path, Err: errEmpty}
	}
	f.value, f.modTime, f.size = value, info.ModTime(), info.Size()
	return value, nil
}

// Changed reports whether the file differs from what the last Read
// returned, so a provider holding a session can log in again.
func (f *SecretFile) Changed() bool {
	info, err := os.Stat(f.Path)
	f.mu.Lock()
	defer f.mu.Unlock()
	return err != nil || !info.ModTime().Equal(f.modTime) || info.Size() != f.size
}

// errEmpty is the cause of a CredentialError for a file holding only
// whitespace.
var errEmpty = errors.New("empty")

// fail wraps an error of reading the file: missing is transient, anything
// else permanent (see Read).
func (f *SecretFile) fail(err error) error {
	ce := &CredentialError{Path: f.Path, Err: err}
	if errors.Is(err, fs.ErrNotExist) {
		return ce
	}
	return Permanent(ce)
}

// CredentialError says that the credential file at Path could not be used:
// it is missing, empty or unreadable. Its text names the path, never the
// content, so it may appear in status, events and logs. The operator finds
// it with errors.As, whatever a provider wrapped around it, to tell a
// missing credential from a backend that is down.
type CredentialError struct {
	// Path is the file's path.
	Path string
	// Err is the cause: an *fs.PathError, or "empty".
	Err error
}

func (e *CredentialError) Error() string {
	switch {
	case errors.Is(e.Err, fs.ErrNotExist):
		return fmt.Sprintf("credential file %s does not exist (its Secret is not mounted yet, or lacks the key)", e.Path)
	case errors.Is(e.Err, errEmpty):
		return fmt.Sprintf("credential file %s is empty", e.Path)
	default:
		return fmt.Sprintf("credential file %s: %v", e.Path, e.Err)
	}
}

func (e *CredentialError) Unwrap() error { return e.Err }
