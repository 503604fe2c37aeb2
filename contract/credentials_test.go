package contract_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// rotate replaces the Secret mount the way the kubelet does: a new data
// directory, then an atomic swap of the symlink the file name points
// through.
func rotate(t *testing.T, dir, value string, at time.Time) {
	t.Helper()
	data, err := os.MkdirTemp(dir, "..data-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "token"), []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(data, "token"), at, at); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(data), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

func TestSecretFileFollowsRotation(t *testing.T) {
	dir := t.TempDir()
	rotate(t, dir, "first-secret\n", time.Unix(1000, 0))
	if err := os.Symlink(filepath.Join("..data", "token"), filepath.Join(dir, "token")); err != nil {
		t.Fatal(err)
	}
	f := &contract.SecretFile{Path: filepath.Join(dir, "token")}
	if got, err := f.Read(); err != nil || got != "first-secret" {
		t.Fatalf("Read = %q, %v", got, err)
	}
	if f.Changed() {
		t.Error("Changed right after Read")
	}
	rotate(t, dir, "second-secret-longer\n", time.Unix(2000, 0))
	if !f.Changed() {
		t.Error("rotation not noticed")
	}
	if got, err := f.Read(); err != nil || got != "second-secret-longer" {
		t.Fatalf("Read after rotation = %q, %v", got, err)
	}
}

func TestSecretFileErrorsNameThePathNotTheContent(t *testing.T) {
	dir := t.TempDir()
	missing := &contract.SecretFile{Path: filepath.Join(dir, "absent")}
	if _, err := missing.Read(); !errors.Is(err, contract.ErrPermanent) || !strings.Contains(err.Error(), "absent") {
		t.Errorf("missing file: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (&contract.SecretFile{Path: empty}).Read(); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("empty file: %v", err)
	}
}
