//go:build e2e

// Package e2e is the end-to-end test of the whole product on a real
// libvirt: a Proxy becomes a QEMU VM that proxies traffic. It runs only
// through hack/e2e/run.sh (make e2e), inside the network namespace that
// hack/e2e/libvirt-up.sh made, where a private libvirtd serves a NAT
// network and a storage pool; the lane's settings come from E2E_*
// variables that run.sh sets.
package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// lane is what run.sh prepared.
type lane struct {
	// URI reaches the private libvirtd; Pool and Network are its pool and
	// NAT network.
	URI, Pool, Network string
	// HostIP is the bridge's address (the origin server listens there),
	// Subnet the network the Proxy allows, OutsideIP an address on the
	// bridge outside it (the client the proxy must refuse).
	HostIP, Subnet, OutsideIP string
	// State is the lane's directory; Image the guest image (qcow2);
	// Operator the operator binary built with -tags libvirt; CRDs the CRD
	// directory.
	State, Image, Operator, CRDs string
	// SSHUser and SSHPort are the lane's sshd on HostIP (hack/e2e/ssh-up.sh),
	// through which the operator reaches the same daemon as a remote host's;
	// SSHKey and SSHKnownHosts are the client key and the known_hosts file
	// naming the sshd's host key, which go into the credentials Secret.
	SSHUser, SSHPort, SSHKey, SSHKnownHosts string
}

func laneFromEnv(t *testing.T) lane {
	t.Helper()
	get := func(name string) string {
		v := os.Getenv(name)
		if v == "" {
			t.Fatalf("%s is not set: run this test through make e2e (hack/e2e/run.sh)", name)
		}
		return v
	}
	l := lane{
		URI: get("E2E_URI"), Pool: get("E2E_POOL"), Network: get("E2E_NET"),
		HostIP: get("E2E_HOST_IP"), Subnet: get("E2E_SUBNET"), OutsideIP: get("E2E_OUTSIDE_IP"),
		State: get("E2E_STATE"), Image: get("E2E_IMAGE"), Operator: get("E2E_OPERATOR"), CRDs: get("E2E_CRDS"),
		SSHUser: get("E2E_SSH_USER"), SSHPort: get("E2E_SSH_PORT"), SSHKey: get("E2E_SSH_KEY"), SSHKnownHosts: get("E2E_SSH_KNOWN_HOSTS"),
	}
	get("KUBEBUILDER_ASSETS")
	return l
}

// serialLogDir is where the provider logs each domain's serial console;
// run.sh prints it when the lane fails.
func (l lane) serialLogDir() string { return filepath.Join(l.State, "serial") }
