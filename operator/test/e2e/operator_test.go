//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
// serial consoles logged for run.sh to print on failure. installOperator
// puts the file in the providers ConfigMap.
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

// The names dist/install.yaml gives the operator's objects.
const (
	installNamespace = "egress-proxies-system"
	deployment       = "egress-proxies-controller-manager"
	configMap        = "egress-proxies-providers-config"
	operatorLabel    = "app.kubernetes.io/name=egress-proxies-operator"
	leaseName        = "egress-proxies-operator.egressproxies.io"
)

// installOperator installs the operator as docs/install.md tells a user
// to, with no registry: kubectl apply of the release manifest, the
// providers config replaced by this lane's, the credentials Secret that
// make libvirt-secret prints, and the libvirt build's image (imported
// into the node by run.sh) set on the Deployment, with the lane's extra
// flags (E2E_OPERATOR_ARGS, to measure another setting); then waits for
// the rollout. It returns how long that took from the apply.
func installOperator(t *testing.T, l lane, providersConfig string) time.Duration {
	t.Helper()
	start := time.Now()
	kubectl(t, l, nil, "apply", "--server-side", "-f", l.Manifest)
	cm := kubectl(t, l, nil, "-n", installNamespace, "create", "configmap", configMap,
		"--from-file=providers.yaml="+providersConfig, "--dry-run=client", "-o", "yaml")
	kubectl(t, l, []byte(cm), "apply", "--server-side", "--force-conflicts", "-f", "-")
	kubectl(t, l, []byte(libvirtSecret(t, l)), "apply", "--server-side", "-f", "-")
	kubectl(t, l, nil, "-n", installNamespace, "set", "image", "deployment/"+deployment, "manager="+l.OperatorImage)
	if len(l.OperatorArgs) > 0 {
		var patch []map[string]string
		for _, arg := range l.OperatorArgs {
			patch = append(patch, map[string]string{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": arg})
		}
		ops, err := json.Marshal(patch)
		if err != nil {
			t.Fatal(err)
		}
		kubectl(t, l, nil, "-n", installNamespace, "patch", "deployment/"+deployment, "--type=json", "-p", string(ops))
		t.Logf("the operator runs with the extra flags %q", l.OperatorArgs)
	}
	kubectl(t, l, nil, "-n", installNamespace, "rollout", "status", "deployment/"+deployment, "--timeout=5m")
	return time.Since(start)
}

// libvirtSecret runs make libvirt-secret with the lane's SSH client key
// and known_hosts and returns the Secret it prints.
func libvirtSecret(t *testing.T, l lane) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "make", "-s", "--no-print-directory", "-C", l.Root, "libvirt-secret",
		"LIBVIRT_SSH_KEY_FILE="+l.SSHKey, "LIBVIRT_KNOWN_HOSTS_FILE="+l.SSHKnownHosts)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make libvirt-secret: %v: %s", err, stderr.String())
	}
	if !strings.Contains(string(out), "kind: Secret") {
		t.Fatalf("make libvirt-secret printed no Secret:\n%s", out)
	}
	return string(out)
}

// saveOperatorLogs writes every operator Pod's log to name in the lane's
// directory, after the lane's own lines (what it did, and when, to line
// up with the log's timestamps); run.sh prints operator.log when the lane
// fails.
func saveOperatorLogs(l lane, name string, header ...string) (log string) {
	// A Cleanup: t.Context() is cancelled by now, and kubectl with it
	// saved nothing but "context canceled".
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := kubectlIn(ctx, l, nil, "-n", installNamespace, "logs", "-l", operatorLabel,
		"--all-containers", "--prefix", "--tail=-1", "--max-log-requests=10")
	if err != nil {
		out += "\n" + err.Error()
	}
	for i := len(header) - 1; i >= 0; i-- {
		out = "[lane] " + header[i] + "\n" + out
	}
	_ = os.WriteFile(filepath.Join(l.State, name), []byte(out), 0o644)
	return out
}
