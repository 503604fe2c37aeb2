//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// virsh runs virsh against the lane's daemon: the test looks at libvirt
// itself, not through the provider under test.
func virsh(t *testing.T, l lane, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "virsh", append([]string{"-q", "-c", l.URI}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("virsh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// domains lists every domain, running or not.
func domains(t *testing.T, l lane) []string {
	t.Helper()
	return strings.Fields(virsh(t, l, "list", "--all", "--name"))
}

// volumes lists the names of the volumes in the lane's pool.
func volumes(t *testing.T, l lane) []string {
	t.Helper()
	virsh(t, l, "pool-refresh", l.Pool)
	var names []string
	for line := range strings.Lines(virsh(t, l, "vol-list", "--pool", l.Pool)) {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	slices.Sort(names)
	return names
}
