//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// leader returns the Pod that holds the operator's leader Lease now
// (controller-runtime writes "<pod>_<uuid>" as the holder).
func leader(ctx context.Context, t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	lease, err := cs.CoordinationV1().Leases(installNamespace).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the leader Lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return ""
	}
	pod, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
	return pod
}

// killLeader crashes the leader: every process of its Pod gets SIGKILL
// (found by the Pod's cgroup, which the kubelet names after the Pod's
// UID), so nothing releases the Lease, and the Pod is deleted at once so
// that the Deployment's new Pod starts from nothing. It returns the
// killed Pod and, once another Pod holds the Lease, that Pod and how long
// the takeover took.
func killLeader(ctx context.Context, t *testing.T, cs kubernetes.Interface) (killed, next string, takeover time.Duration) {
	t.Helper()
	killed = leader(ctx, t, cs)
	if killed == "" {
		t.Fatal("no Pod holds the leader Lease")
	}
	pod, err := cs.CoreV1().Pods(installNamespace).Get(ctx, killed, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the leader Pod %s: %v", killed, err)
	}
	start := time.Now()
	pids := podProcesses(t, string(pod.UID))
	if len(pids) == 0 {
		t.Fatalf("no process is in the cgroup of Pod %s (%s)", killed, pod.UID)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	err = cs.CoreV1().Pods(installNamespace).Delete(ctx, killed, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	if err != nil {
		t.Fatalf("delete the leader Pod %s: %v", killed, err)
	}
	t.Logf("killed the leader %s (processes %v) and deleted its Pod", killed, pids)
	within(t, 2*time.Minute, 200*time.Millisecond, "another Pod takes the Lease "+leaseName+" after "+killed+" was killed", func() (bool, string) {
		next = leader(ctx, t, cs)
		return next != "" && next != killed, "held by " + next
	})
	return killed, next, time.Since(start)
}

// podProcesses lists the processes in a Pod's cgroup: the kubelet's
// cgroupfs driver puts them under .../pod<UID>/<container>.
func podProcesses(t *testing.T, uid string) []int {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(data), "/pod"+uid+"/") {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
