//go:build e2e

package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// chartRelease is the Helm release the lane installs.
const chartRelease = "egress-proxies"

// reinstallWithChart removes the operator installed from the release
// manifest, as docs/install.md says to uninstall it (kubectl delete of the
// same file: its CRDs, namespace, RBAC and webhooks go), and installs it
// again from the release's Helm chart on the same node, as a platform team
// on Helm does: the chart's defaults (two replicas, its priority class,
// its PodDisruptionBudget) but for the lane's image, providers config and
// credentials Secret, which the chart never creates. It returns how long
// the uninstall and the install (to every replica ready) took.
func reinstallWithChart(t *testing.T, l lane, providersConfig string) (uninstalled, installed time.Duration) {
	t.Helper()
	start := time.Now()
	kubectl(t, l, nil, "delete", "-f", l.Manifest, "--ignore-not-found", "--wait", "--timeout=5m")
	uninstalled = time.Since(start)

	start = time.Now()
	kubectl(t, l, nil, "create", "namespace", installNamespace)
	kubectl(t, l, []byte(libvirtSecret(t, l)), "apply", "--server-side", "-f", "-")
	repo, tag, ok := strings.Cut(l.OperatorImage, ":")
	if !ok {
		t.Fatalf("E2E_OPERATOR_IMAGE %q: want REPOSITORY:TAG", l.OperatorImage)
	}
	helm(t, l, "install", chartRelease, l.Chart, "--namespace", installNamespace,
		"--set", "image.repository="+repo, "--set", "image.tag="+tag,
		"--set-file", "providersConfig="+providersConfig, "--wait", "--timeout", "5m")
	return uninstalled, time.Since(start)
}

// uninstallChart removes the Helm release and waits for its Pods to go:
// helm uninstall --wait returns once the Deployment is gone, while its
// Pods are still terminating.
func uninstallChart(t *testing.T, l lane) time.Duration {
	t.Helper()
	start := time.Now()
	helm(t, l, "uninstall", chartRelease, "--namespace", installNamespace, "--wait", "--timeout", "5m")
	within(t, 2*time.Minute, 500*time.Millisecond, "the chart's operator Pods are gone after helm uninstall", func() (bool, string) {
		out := strings.TrimSpace(kubectl(t, l, nil, "-n", installNamespace, "get", "pods", "-l", operatorLabel, "-o", "name"))
		return out == "", "still there: " + out
	})
	return time.Since(start)
}

// helm runs the lane's helm against the node.
func helm(t *testing.T, l lane, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), l.Helm, append([]string{"--kubeconfig", l.Kubeconfig}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// chartProxy is a Proxy on the chart's operator: Ready on a VM, and gone
// with its VM when deleted.
func chartProxy(t *testing.T, k8s client.Client, l lane) (ready, deleted time.Duration) {
	t.Helper()
	ctx := t.Context()
	p := newProxy("egress-chart", l)
	if err := k8s.Create(ctx, p); err != nil {
		t.Fatalf("create the Proxy %s on the chart's operator: %v", p.Name, err)
	}
	start := time.Now()
	got, _, _ := waitReady(ctx, t, k8s, client.ObjectKeyFromObject(p), 15*time.Minute)
	ready = time.Since(start)
	if ds := domains(t, l); len(ds) != 1 || ds[0] != got.Status.Instance.Name {
		t.Errorf("domains with the chart's operator: %v, want only %s", ds, got.Status.Instance.Name)
	}
	start = time.Now()
	if err := k8s.Delete(ctx, p); err != nil {
		t.Fatalf("delete the Proxy %s: %v", p.Name, err)
	}
	waitGone(ctx, t, k8s, client.ObjectKeyFromObject(p), 5*time.Minute)
	deleted = time.Since(start)
	if ds := domains(t, l); len(ds) != 0 {
		t.Errorf("domains left after the chart's Proxy was deleted: %v", ds)
	}
	return ready, deleted
}
