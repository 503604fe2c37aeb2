package main

import (
	"bytes"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// publish runs a command, failing the test on an error.
func publish(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("publish %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// indexLayout writes a random two-image index as oci-index's layout has
// it: one entry, the index.
func indexLayout(t *testing.T) (string, v1.ImageIndex) {
	t.Helper()
	idx, err := random.Index(512, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendIndex(idx); err != nil {
		t.Fatal(err)
	}
	return dir, idx
}

// keys generates a key pair in a directory of its own.
func keys(t *testing.T) (private, public string) {
	t.Helper()
	dir := t.TempDir()
	pub := publish(t, "keygen", "-dir", dir)
	return filepath.Join(dir, "cosign.key"), pub
}

// An index pushed and signed verifies with the key's public half, by tag
// and by digest; it does not with another key, and the tag does not once
// another index is pushed under it (a tampered image).
func TestSignedIndexVerifies(t *testing.T) {
	t.Setenv("COSIGN_PASSWORD", "test")
	srv := httptest.NewServer(registry.New())
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	ref := host + "/egress-proxies-operator:v1"

	dir, idx := indexLayout(t)
	private, public := keys(t)
	digest := publish(t, "image", "-layout", dir, "-ref", ref, "-key", private)
	want, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if digest != host+"/egress-proxies-operator@"+want.String() {
		t.Fatalf("pushed %s, want the index's digest %s", digest, want)
	}
	for _, r := range []string{ref, digest} {
		if out := publish(t, "verify", "-ref", r, "-key", public); !strings.Contains(out, want.String()) || !strings.Contains(out, "1 signature(s)") {
			t.Errorf("verify %s: %q", r, out)
		}
	}

	_, otherPublic := keys(t)
	var stderr bytes.Buffer
	if err := run(t.Context(), []string{"verify", "-ref", ref, "-key", otherPublic}, &bytes.Buffer{}, &stderr); err == nil || !strings.Contains(err.Error(), "no matching signatures") {
		t.Errorf("verify with another key: %v, want cosign's \"no matching signatures\"", err)
	}

	tampered, err := random.Index(512, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(tag, tampered); err != nil {
		t.Fatal(err)
	}
	if err := run(t.Context(), []string{"verify", "-ref", ref, "-key", public}, &bytes.Buffer{}, &stderr); err == nil || !strings.Contains(err.Error(), "no signatures found") {
		t.Errorf("verify of another index pushed under the signed tag: %v, want cosign's \"no signatures found\"", err)
	}
	// The signed digest itself still verifies.
	publish(t, "verify", "-ref", digest, "-key", public)
}

// Bad input is refused naming the flag, before any registry is called.
func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "want a command"},
		{[]string{"sign"}, `command "sign"`},
		{[]string{"keygen"}, "keygen -dir: required"},
		{[]string{"image", "-layout", "x", "-ref", "r:v1"}, "-layout, -ref and -key are required"},
		{[]string{"image", "-layout", "x", "-ref", "Bad::ref", "-key", "k"}, `-ref "Bad::ref"`},
		{[]string{"verify", "-ref", "r:v1"}, "-ref and -key are required"},
		{[]string{"registry", "-addr", "0.0.0.0:0"}, `-addr "0.0.0.0:0": want a loopback address`},
	} {
		err := run(t.Context(), tc.args, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
