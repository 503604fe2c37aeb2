//go:build e2e

package e2e

import (
	"context"
	"io"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// runClientPod runs the proxy client (`probe through`, hack/e2e/node/probe)
// as a Pod in namespace ns, sending GET target through proxyURL, and returns
// whether it succeeded (a 200), what it printed and how long the Pod took
// from create to its end.
func runClientPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, l lane, ns, name, proxyURL, target string) (bool, string, time.Duration) {
	t.Helper()
	pod := clientPod(l, ns, name, "through", proxyURL, target)
	start := time.Now()
	createPod(ctx, t, cs, pod)
	var phase corev1.PodPhase
	for {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get the client Pod: %v", err)
		}
		phase = p.Status.Phase
		if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
			break
		}
		if time.Since(start) > 4*time.Minute {
			t.Fatalf("the client Pod is %s after %s: %+v", phase, since(start), p.Status.ContainerStatuses)
		}
		time.Sleep(500 * time.Millisecond)
	}
	took := time.Since(start)
	return phase == corev1.PodSucceeded, podLog(ctx, t, cs, ns, name), took
}

// clientPod is a Pod of the client image running probe with args, as a
// non-root user with a read-only root, as an application Pod in a
// locked-down namespace would.
func clientPod(l lane, ns, name string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "client", Image: l.ClientImage, ImagePullPolicy: corev1.PullNever,
				Args: args,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// createPod creates pod and deletes it when the test ends.
func createPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, pod *corev1.Pod) {
	t.Helper()
	if _, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the client Pod %s: %v", pod.Name, err)
	}
	// The test's context has ended when cleanups run: the delete needs
	// one of its own that the test's end does not cancel.
	cleanupCtx := context.WithoutCancel(ctx)
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods(pod.Namespace).Delete(cleanupCtx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
}

// podLog returns what the Pod's container printed so far.
func podLog(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	logs, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).Stream(ctx)
	if err != nil {
		t.Fatalf("the client Pod %s's log: %v", name, err)
	}
	defer func() { _ = logs.Close() }()
	out, err := io.ReadAll(logs)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
