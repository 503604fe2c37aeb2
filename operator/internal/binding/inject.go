package binding

import (
	corev1 "k8s.io/api/core/v1"
)

// Env is the proxy configuration a bound Pod's containers get.
type Env struct {
	// ProxyURL is the Proxy's Service, http://<name>.<namespace>.svc.<domain>:<port>:
	// the Service follows the Proxy's serving replicas, so the URL outlives
	// any one VM.
	ProxyURL string
	// NoProxy is NoProxy's value for the Pod.
	NoProxy string
}

// Variables are the environment variables Inject sets, in this order.
// Both cases: curl reads only http_proxy in lower case, Go and many other
// runtimes read either, some only the upper case.
func (e Env) Variables() []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "HTTP_PROXY", Value: e.ProxyURL},
		{Name: "HTTPS_PROXY", Value: e.ProxyURL},
		{Name: "NO_PROXY", Value: e.NoProxy},
		{Name: "http_proxy", Value: e.ProxyURL},
		{Name: "https_proxy", Value: e.ProxyURL},
		{Name: "no_proxy", Value: e.NoProxy},
	}
}

// Inject sets e's variables on every container and init container of pod
// that does not set them itself: a variable the Pod's author wrote wins,
// so a Pod can still point one runtime elsewhere. It reports whether it
// changed anything.
func Inject(pod *corev1.Pod, e Env) bool {
	changed := false
	for _, containers := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range containers {
			c := &containers[i]
			for _, v := range e.Variables() {
				if !hasEnv(c, v.Name) {
					c.Env = append(c.Env, v)
					changed = true
				}
			}
		}
	}
	return changed
}

func hasEnv(c *corev1.Container, name string) bool {
	for _, v := range c.Env {
		if v.Name == name {
			return true
		}
	}
	return false
}
