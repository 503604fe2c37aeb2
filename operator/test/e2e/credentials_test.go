//go:build e2e

package e2e

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/secretvolume"
)

// The credentials Secret's keys for libvirt over SSH, as make
// libvirt-secret names them.
const (
	sshKeyKey     = "libvirt-ssh-key"
	knownHostsKey = "libvirt-known-hosts"
)

// writeCredentials lays the lane's SSH client key and known_hosts out in a
// directory as the kubelet mounts the credentials Secret (its atomic
// writer's `..data` symlinks, files 0644: a Secret volume's defaultMode,
// readable by the non-root operator without an fsGroup), and returns the
// directory and the region URI naming the files in it, shaped as the
// documented production URI.
//
// The transport is libssh2, not libssh: with Debian 12's libvirt 9.0 and
// libssh 0.10.6, calls made at once on one qemu+libssh:// connection never
// return (two goroutines suffice; the same calls one at a time, or over
// libssh2 or the UNIX socket, do), and the operator makes calls at once.
// The first lane over libssh waited 15 minutes on Create's address lookup.
func writeCredentials(t *testing.T, l lane) (dir, uri string) {
	t.Helper()
	data := map[string]string{}
	for key, path := range map[string]string{sshKeyKey: l.SSHKey, knownHostsKey: l.SSHKnownHosts} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		data[key] = string(b)
	}
	dir = filepath.Join(l.State, "credentials")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := secretvolume.Write(dir, data); err != nil {
		t.Fatalf("credentials directory: %v", err)
	}
	host := l.HostIP
	if l.SSHPort != "22" {
		host = net.JoinHostPort(l.HostIP, l.SSHPort)
	}
	// The query written out, not encoded: the paths stay readable, as in
	// the documented URI (they have nothing to escape).
	u := url.URL{Scheme: "qemu+libssh2", User: url.User(l.SSHUser), Host: host, Path: "/system",
		RawQuery: "sshauth=privkey&keyfile=" + filepath.Join(dir, sshKeyKey) + "&known_hosts=" + filepath.Join(dir, knownHostsKey)}
	return dir, u.String()
}
