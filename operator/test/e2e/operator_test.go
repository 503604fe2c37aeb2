//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The catalogue keys the Proxy names.
const (
	providerName = "e2e-libvirt"
	region       = "lab"
	machineType  = "small"
	imageKey     = "debian-proxy"
)

// writeProvidersConfig writes a providers config with one libvirt provider
// for the lane's daemon, reached at uri: TCG domains (KVM cannot boot a
// stock guest on these machines), the guest image fetched from imageURL,
// serial consoles logged for run.sh to print on failure. The file is 0644,
// as the kubelet mounts a ConfigMap, for the non-root operator to read.
func writeProvidersConfig(t *testing.T, l lane, uri, imageURL, imageSHA256 string) string {
	t.Helper()
	if err := os.MkdirAll(l.serialLogDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(l.State, "providers.yaml")
	data := fmt.Appendf(nil, `defaultAllowedClients: [%q]
providers:
  - name: %s
    type: libvirt
    checkInterval: 10s
    libvirt:
      domainType: qemu
      machine: pc
      serialLogDir: %s
      regions:
        %s: {uri: %q, pool: %s, network: %s}
      machineTypes:
        %s: {cpus: 2, memoryMiB: 1024}
      images:
        %s: {url: %q, sha256: %s, format: qcow2}
`, l.Subnet, providerName, l.serialLogDir(), region, uri, l.Pool, l.Network, machineType, imageKey, imageURL, imageSHA256)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startOperator runs the operator binary (built with -tags libvirt) as its
// Pod would (asPod: non-root, read-only root filesystem but for a
// temporary directory, HOME=/) with the providers config and the
// credentials directory, against the local control plane, logging to
// operator.log in the lane's directory (run.sh prints it on failure). It
// is stopped at cleanup with SIGTERM, as a Deployment would stop it.
func startOperator(t *testing.T, l lane, kubeconfig, providersConfig, credentialsDir string) {
	t.Helper()
	logPath := filepath.Join(l.State, "operator.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	// In the Pod, a ServiceAccount token; here the admin kubeconfig, made
	// the operator's to read.
	if err := os.Chown(kubeconfig, operatorUID, operatorUID); err != nil {
		t.Fatal(err)
	}
	// The one writable directory, as the emptyDir the Pod needs at /tmp:
	// the libvirt provider builds each seed ISO in a temporary file
	// (streamed, never whole in memory); on the read-only root it fails
	// with "seed for <name>: open /tmp/egress-seed-….iso: read-only file
	// system".
	tmp := filepath.Join(l.State, "operator-tmp")
	if err := os.Mkdir(tmp, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, 0o777); err != nil { // an emptyDir's mode, whatever the umask
		t.Fatal(err)
	}
	env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/", "TMPDIR=" + tmp, "KUBECONFIG=" + kubeconfig}
	// Not t.Context(): that ends before the cleanups, and the operator
	// must outlive it to be stopped gently below.
	cmd := asPod(context.Background(), env, []string{tmp}, l.Operator, "--providers-config", providersConfig,
		"--credentials-dir", credentialsDir, "--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the operator: %v", err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = logFile.Close()
	})
	// An invalid config stops the operator at once: fail with its words.
	select {
	case <-exited:
		out, _ := os.ReadFile(logPath)
		t.Fatalf("the operator exited at start (%v):\n%s", waitErr, out)
	case <-time.After(3 * time.Second):
	}
}
