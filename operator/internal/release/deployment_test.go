package release

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// version is the release the manifests are rendered for: the VERSION file,
// which the Makefile's VERSION reads.
func version(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(raw))
}

// The operator as installed: two replicas, one of which leads, kept apart
// when the cluster can, never both evicted at once; its image the one
// make image-operator tags, used from the node without a registry.
func TestDeploymentIsHighlyAvailable(t *testing.T) {
	objs := render(t)
	dep := deployment(t, objs)
	if r := dep.Spec.Replicas; r == nil || *r != 2 {
		t.Errorf("replicas %s, want 2", ptr(r))
	}
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if !slices.Contains(c.Args, "--leader-elect") {
		t.Errorf("args %v: no --leader-elect, so both replicas would reconcile", c.Args)
	}
	if want := "egress-proxies-operator:" + version(t); c.Image != want {
		t.Errorf("image %q, want %q (make image-operator's tag)", c.Image, want)
	}
	if c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("imagePullPolicy %q, want %q: an image imported into the node needs no registry", c.ImagePullPolicy, corev1.PullIfNotPresent)
	}

	// Spread, but only preferred: a single-node cluster runs both.
	if pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil || len(pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		t.Error("no preferred pod anti-affinity: both replicas may land on one node")
	} else {
		if len(pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			t.Error("required pod anti-affinity: a single-node cluster could run only one replica")
		}
		term := pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
		if !selects(t, term.LabelSelector, dep.Spec.Template.Labels) {
			t.Errorf("the anti-affinity selector %v does not select the operator's Pods %v", term.LabelSelector, dep.Spec.Template.Labels)
		}
	}

	pdb := &policyv1.PodDisruptionBudget{}
	only(t, objs, "PodDisruptionBudget", pdb)
	if pdb.Namespace != dep.Namespace || !selects(t, pdb.Spec.Selector, dep.Spec.Template.Labels) {
		t.Errorf("the PodDisruptionBudget %s/%s does not cover the operator's Pods", pdb.Namespace, pdb.Name)
	}
	one := intstr.FromInt32(1)
	if (pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != one) && (pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != one) {
		t.Errorf("PodDisruptionBudget maxUnavailable %v, minAvailable %v: want one of them 1", pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
	}
}

// The pod runs as the image's non-root user, by number: runAsNonRoot
// cannot verify a user the image names only by name.
func TestPodRunsAsNonRootUID(t *testing.T) {
	pod := deployment(t, render(t)).Spec.Template.Spec
	sc := pod.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and a non-zero runAsUser", sc)
	}
}

// The metrics Service reaches the port the operator serves metrics on.
func TestMetricsServiceReachesTheEndpoint(t *testing.T) {
	objs := render(t)
	dep := deployment(t, objs)
	svc := &corev1.Service{}
	named(t, objs, "Service", "egress-proxies-controller-manager-metrics-service", svc)
	if svc.Namespace != dep.Namespace || !selects(t, &metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, dep.Spec.Template.Labels) {
		t.Fatalf("the Service %s/%s does not select the operator's Pods", svc.Namespace, svc.Name)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	var bind string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--metrics-bind-address="); ok {
			bind = v
		}
	}
	for _, p := range svc.Spec.Ports {
		var port *corev1.ContainerPort
		for i := range c.Ports {
			if p.TargetPort.String() == c.Ports[i].Name || p.TargetPort.IntValue() == int(c.Ports[i].ContainerPort) {
				port = &c.Ports[i]
			}
		}
		if port == nil {
			t.Errorf("Service port %s targets %s, no port of the container", p.Name, p.TargetPort.String())
		} else if !strings.HasSuffix(bind, fmt.Sprintf(":%d", port.ContainerPort)) {
			t.Errorf("Service port %s reaches container port %d; --metrics-bind-address is %q", p.Name, port.ContainerPort, bind)
		}
	}
}

// selects reports whether sel matches podLabels.
func selects(t *testing.T, sel *metav1.LabelSelector, podLabels map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return !s.Empty() && s.Matches(labels.Set(podLabels))
}

// ptr prints what p points at, or "unset".
func ptr[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}
