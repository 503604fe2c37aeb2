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

// A file that is missing or empty is a Secret not mounted yet (or without
// this key): transient, so the operator retries and the credential is
// picked up once the kubelet writes it. The error names the path, and says
// which file through CredentialError, never what it holds.
func TestSecretFileMissingOrEmptyIsTransient(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"missing": filepath.Join(dir, "absent"), "empty": empty} {
		_, err := (&contract.SecretFile{Path: path}).Read()
		if c := contract.ClassOf(err); c != contract.ClassTransient {
			t.Errorf("%s file: class %s (%v), want Transient", name, c, err)
		}
		var ce *contract.CredentialError
		if !errors.As(err, &ce) || ce.Path != path || !strings.Contains(err.Error(), path) {
			t.Errorf("%s file: %v, want a CredentialError naming %s", name, err, path)
		}
	}
}

// A path the credential can never be read from (here a directory) needs a
// person to change the config: permanent, and still a CredentialError.
func TestSecretFileUnreadableIsPermanent(t *testing.T) {
	dir := t.TempDir()
	_, err := (&contract.SecretFile{Path: dir}).Read()
	var ce *contract.CredentialError
	if !errors.Is(err, contract.ErrPermanent) || !errors.As(err, &ce) || ce.Path != dir {
		t.Errorf("a directory: %v, want a permanent CredentialError naming %s", err, dir)
	}
}

// The Secret appears after the provider first looked: the next Read
// returns it.
func TestSecretFileAppearsLate(t *testing.T) {
	dir := t.TempDir()
	f := &contract.SecretFile{Path: filepath.Join(dir, "token")}
	if _, err := f.Read(); err == nil {
		t.Fatal("Read of a file not written yet succeeded")
	}
	if !f.Changed() {
		t.Error("a missing file is not reported Changed")
	}
	rotate(t, dir, "late-secret-7c1d\n", time.Unix(1000, 0))
	if err := os.Symlink(filepath.Join("..data", "token"), filepath.Join(dir, "token")); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Read(); err != nil || got != "late-secret-7c1d" {
		t.Fatalf("Read after the Secret appeared = %q, %v", got, err)
	}
}
