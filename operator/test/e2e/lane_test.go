//go:build e2e

// Package e2e is the end-to-end test of the whole product, installed as
// users install it: a real single-node Kubernetes cluster
// (hack/e2e/node-up.sh) runs the operator's image as a Pod from
// dist/install.yaml, under its own ServiceAccount and generated RBAC, and
// a Proxy becomes a QEMU VM on a private libvirt that a client Pod uses
// through the Proxy's Service. It runs only through hack/e2e/run.sh (make
// e2e), inside the lane's network namespace; the lane's settings come
// from E2E_* variables that run.sh sets.
package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lane is what run.sh prepared.
type lane struct {
	// URI reaches the private libvirtd through its socket (the test's own
	// virsh checks); Pool and Network are its pool and NAT network.
	URI, Pool, Network string
	// HostIP is the bridge's address (the origin and image servers listen
	// there), Subnet the VMs' network, OutsideIP an address on the bridge
	// outside the Proxy's allowed clients (the client the proxy must
	// refuse), PodCIDR the node's Pod network.
	HostIP, Subnet, OutsideIP, PodCIDR string
	// State is the lane's directory; Image the guest image (qcow2); Root
	// the repository (make libvirt-secret runs there).
	State, Image, Root string
	// SSHUser and SSHPort are the lane's sshd on HostIP (hack/e2e/ssh-up.sh),
	// through which the operator reaches the daemon as a remote host's;
	// SSHKey and SSHKnownHosts are the client key and the known_hosts file
	// naming the sshd's host key, which go into the credentials Secret.
	SSHUser, SSHPort, SSHKey, SSHKnownHosts string
	// Kubeconfig is the node's admin (the test's identity), Kubectl its
	// kubectl, Manifest the release manifest (dist/install.yaml),
	// OperatorImage the operator's libvirt image and ClientImage the
	// client Pod's, both imported into the node's containerd.
	Kubeconfig, Kubectl, Manifest, OperatorImage, ClientImage string
	// Helm is the pinned helm and Chart the release's packaged chart
	// (make release-chart): the second install path (chart_test.go).
	Helm, Chart string
	// Monitoring is the release's monitoring kit (dist/monitoring.yaml),
	// which the lane's Prometheus follows (prometheus_test.go).
	Monitoring string
	// OperatorArgs are flags added to the operator's (E2E_OPERATOR_ARGS,
	// space-separated; unset in CI), to measure a setting against the
	// default: E2E_OPERATOR_ARGS=--serving-watch-period=-1s make e2e.
	OperatorArgs []string
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
	return lane{
		URI: get("E2E_URI"), Pool: get("E2E_POOL"), Network: get("E2E_NET"),
		HostIP: get("E2E_HOST_IP"), Subnet: get("E2E_SUBNET"), OutsideIP: get("E2E_OUTSIDE_IP"), PodCIDR: get("E2E_POD_CIDR"),
		State: get("E2E_STATE"), Image: get("E2E_IMAGE"), Root: get("E2E_ROOT"),
		SSHUser: get("E2E_SSH_USER"), SSHPort: get("E2E_SSH_PORT"), SSHKey: get("E2E_SSH_KEY"), SSHKnownHosts: get("E2E_SSH_KNOWN_HOSTS"),
		Kubeconfig: get("E2E_KUBECONFIG"), Kubectl: get("E2E_KUBECTL"), Manifest: get("E2E_MANIFEST"),
		OperatorImage: get("E2E_OPERATOR_IMAGE"), ClientImage: get("E2E_CLIENT_IMAGE"),
		Helm: get("E2E_HELM"), Chart: get("E2E_CHART"), Monitoring: get("E2E_MONITORING"),
		OperatorArgs: strings.Fields(os.Getenv("E2E_OPERATOR_ARGS")),
	}
}

// serialLogDir is where the provider has the daemon log each domain's
// serial console; run.sh prints it when the lane fails.
func (l lane) serialLogDir() string { return filepath.Join(l.State, "serial") }
