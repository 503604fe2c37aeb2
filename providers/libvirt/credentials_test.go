package libvirt

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestCredentialFiles(t *testing.T) {
	got := credentialFiles("qemu+libssh://u@h/system?sshauth=privkey&keyfile=/c/key&known_hosts=/c/hosts")
	if !slices.Equal(got, []string{"/c/key", "/c/hosts"}) {
		t.Errorf("ssh: %v", got)
	}
	got = credentialFiles("qemu+tls://h/system?pkipath=/c/pki")
	if !slices.Equal(got, []string{"/c/pki/cacert.pem", "/c/pki/clientcert.pem", "/c/pki/clientkey.pem"}) {
		t.Errorf("tls: %v", got)
	}
	if got := credentialFiles("qemu:///system"); len(got) != 0 {
		t.Errorf("local: %v", got)
	}
}

// A rotated key file changes the fingerprint, so the next call reconnects.
func TestRotatedKeyReconnects(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(key, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := newTestBackend(t)
	cfg := b.cfg
	cfg.Regions = map[string]Region{testRegion: {URI: testURI + "?keyfile=" + key, Pool: testPool, Network: "default"}}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first, err := p.conn(t.Context(), testRegion, 0)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := p.conn(t.Context(), testRegion, 0); again != first {
		t.Fatal("an unchanged credential reconnected")
	}
	if err := os.WriteFile(key, []byte("rotated key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if rotated, err := p.conn(t.Context(), testRegion, 0); err != nil || rotated == first {
		t.Errorf("a rotated credential kept the old connection (%v)", err)
	}
}
