//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"strconv"
)

// operatorUID is the operator's user in the lane, as in its Pod: not root,
// and with no entry in /etc/passwd (as a distroless image's nonroot user
// has none on this machine), so nothing can find a home directory but
// through $HOME.
const operatorUID = 65532

// asPod returns the command running argv with what the Deployment's Pod
// gives the operator (operator/config/manager/manager.yaml):
//   - operatorUID, no supplementary groups, no capabilities, no_new_privs
//     (runAsNonRoot, capabilities drop ALL, allowPrivilegeEscalation false);
//   - a read-only root filesystem (readOnlyRootFilesystem): a mount
//     namespace of its own in which / is remounted read-only, which takes
//     the lane's state directory under /tmp with it. Each of writable stays
//     writable: the emptyDir volumes of the Pod;
//   - env and nothing else; with HOME=/ in it, as runc sets it for a user
//     without a passwd entry.
//
// unshare, sh and setpriv each exec the next, so the command's process is
// the operator's: a signal to it reaches the operator.
func asPod(ctx context.Context, env, writable []string, argv ...string) *exec.Cmd {
	script := `n=$1; shift
for i in $(seq "$n"); do mount --bind "$1" "$1"; shift; done
mount -o remount,bind,ro /
uid=$1; shift
exec setpriv --reuid="$uid" --regid="$uid" --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs -- "$@"`
	args := []string{"--mount", "--propagation", "slave", "--", "sh", "-euc", script, "sh", strconv.Itoa(len(writable))}
	args = append(args, writable...)
	args = append(args, strconv.Itoa(operatorUID))
	args = append(args, argv...)
	cmd := exec.CommandContext(ctx, "unshare", args...)
	cmd.Env = env
	return cmd
}
