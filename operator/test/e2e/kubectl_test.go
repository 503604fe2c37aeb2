//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
)

// kubectl runs the lane's kubectl as the cluster's admin (the test's own
// identity; the operator runs under its ServiceAccount only) and returns
// its standard output; a failure ends the test with what it printed.
func kubectl(t *testing.T, l lane, stdin []byte, args ...string) string {
	t.Helper()
	out, err := kubectlErr(t, l, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func kubectlErr(t *testing.T, l lane, stdin []byte, args ...string) (string, error) {
	t.Helper()
	return kubectlIn(t.Context(), l, stdin, args...)
}

// kubectlIn is kubectlErr within ctx: a test's Cleanup runs after
// t.Context() is cancelled, and needs a context of its own.
func kubectlIn(ctx context.Context, l lane, stdin []byte, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, l.Kubectl, append([]string{"--kubeconfig", l.Kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &commandError{err: err, stderr: stderr.String()}
	}
	return stdout.String(), nil
}

type commandError struct {
	err    error
	stderr string
}

func (e *commandError) Error() string { return e.err.Error() + ": " + strings.TrimSpace(e.stderr) }
