package binding

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func envOf(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, v := range c.Env {
		if _, dup := m[v.Name]; dup {
			m[v.Name] = "DUPLICATE"
			continue
		}
		m[v.Name] = v.Value
	}
	return m
}

func TestInjectSetsEveryContainerAndKeepsThePodsOwn(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init"}},
		Containers: []corev1.Container{
			{Name: "app", Env: []corev1.EnvVar{{Name: "LOG", Value: "debug"}}},
			{Name: "own", Env: []corev1.EnvVar{{Name: "https_proxy", Value: "http://elsewhere:8080"}}},
		},
	}}
	e := Env{ProxyURL: "http://p.ns.svc.cluster.local:3128", NoProxy: "localhost,.svc"}
	if !Inject(pod, e) {
		t.Fatal("Inject reported no change")
	}
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		env := envOf(c)
		for _, v := range e.Variables() {
			want := v.Value
			if c.Name == "own" && v.Name == "https_proxy" {
				want = "http://elsewhere:8080"
			}
			if env[v.Name] != want {
				t.Errorf("container %s: %s = %q, want %q", c.Name, v.Name, env[v.Name], want)
			}
		}
	}
	if envOf(pod.Spec.Containers[0])["LOG"] != "debug" {
		t.Errorf("the container's own variable was lost: %v", pod.Spec.Containers[0].Env)
	}
	if Inject(pod, e) {
		t.Errorf("a second Inject changed the Pod again: %v", pod.Spec.Containers[0].Env)
	}
}

func TestVariablesAreBothCases(t *testing.T) {
	got := map[string]bool{}
	for _, v := range (Env{}).Variables() {
		got[v.Name] = true
	}
	for _, name := range []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"} {
		if !got[name] {
			t.Errorf("Variables lacks %s", name)
		}
	}
}
