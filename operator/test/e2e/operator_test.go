//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
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
// for the lane's daemon: TCG domains (KVM cannot boot a stock guest on
// these machines), the guest image fetched from imageURL, serial consoles
// logged for run.sh to print on failure.
func writeProvidersConfig(t *testing.T, l lane, imageURL, imageSHA256 string) string {
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
`, l.Subnet, providerName, l.serialLogDir(), region, l.URI, l.Pool, l.Network, machineType, imageKey, imageURL, imageSHA256)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startOperator runs the operator binary (built with -tags libvirt) with
// the providers config against the local control plane, logging to
// operator.log in the lane's directory (run.sh prints it on failure). It
// is stopped at cleanup with SIGTERM, as a Deployment would stop it.
func startOperator(t *testing.T, l lane, kubeconfig, providersConfig string) {
	t.Helper()
	logPath := filepath.Join(l.State, "operator.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	// Not t.Context(): that ends before the cleanups, and the operator
	// must outlive it to be stopped gently below.
	cmd := exec.CommandContext(context.Background(), l.Operator, "--providers-config", providersConfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
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
