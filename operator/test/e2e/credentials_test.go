//go:build e2e

package e2e

import (
	"net"
	"net/url"
	"path"
)

// The credentials Secret's keys for libvirt over SSH, as make
// libvirt-secret names them (the Makefile).
const (
	sshKeyKey     = "libvirt-ssh-key"
	knownHostsKey = "libvirt-known-hosts"
)

// credentialsDir is where the Deployment mounts the credentials Secret.
const credentialsDir = "/etc/egress-proxies/credentials"

// podURI is the region URI the operator's Pod reaches the lane's libvirt
// with, shaped as the documented production URI: the key and known_hosts
// are files of the mounted Secret.
//
// The transport is libssh2, not libssh: with Debian 12's libvirt 9.0 and
// libssh 0.10.6, calls made at once on one qemu+libssh:// connection never
// return (two goroutines suffice; the same calls one at a time, or over
// libssh2 or the UNIX socket, do), and the operator makes calls at once.
// The first lane over libssh waited 15 minutes on Create's address lookup.
func podURI(l lane) string {
	host := l.HostIP
	if l.SSHPort != "22" {
		host = net.JoinHostPort(l.HostIP, l.SSHPort)
	}
	// The query written out, not encoded: the paths stay readable, as in
	// the documented URI (they have nothing to escape).
	u := url.URL{Scheme: "qemu+libssh2", User: url.User(l.SSHUser), Host: host, Path: "/system",
		RawQuery: "sshauth=privkey&keyfile=" + path.Join(credentialsDir, sshKeyKey) + "&known_hosts=" + path.Join(credentialsDir, knownHostsKey)}
	return u.String()
}
