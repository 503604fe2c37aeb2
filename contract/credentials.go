package contract

import (
	"fmt"
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
// newline editors add) removed. Its errors name the path, never the
// content; a missing or empty file is an ErrPermanent that names it.
func (f *SecretFile) Read() (string, error) {
	info, err := os.Stat(f.Path)
	if err != nil {
		return "", Permanentf("credential file %s: %w", f.Path, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.value != "" && info.ModTime().Equal(f.modTime) && info.Size() == f.size {
		return f.value, nil
	}
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return "", Permanentf("credential file %s: %w", f.Path, err)
	}
	value := strings.TrimSpace(string(data))
	if value == "" {
		return "", Permanent(fmt.Errorf("credential file %s is empty", f.Path))
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
