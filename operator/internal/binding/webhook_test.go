package binding

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controllertest"
)

// namespace creates a Namespace with labels and annotations, deleted when
// the test ends, and returns its name.
func namespace(t *testing.T, labels, annotations map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bind-", Labels: labels, Annotations: annotations}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return ns.Name
}

// proxy creates Proxy name in ns, listening on port.
func proxy(t *testing.T, ns, name string, port int32) {
	t.Helper()
	p := &v1alpha1.Proxy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.ProxySpec{
			Provider: "lab", Port: port, AllowedClients: []v1alpha1.CIDR{"10.244.0.0/16"},
			Placement: v1alpha1.Placement{Region: "r", MachineType: "small", Image: "debian-12"},
		},
	}
	if err := k8s.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// createPod creates a Pod with the containers named, labels and
// annotations, and returns it as admitted.
func createPod(t *testing.T, ns string, labels, annotations map[string]string, containers ...corev1.Container) (*corev1.Pod, error) {
	t.Helper()
	if len(containers) == 0 {
		containers = []corev1.Container{{Name: "app", Image: "app"}}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "client-", Namespace: ns, Labels: labels, Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: containers},
	}
	err := k8s.Create(context.Background(), pod)
	return pod, err
}

func mustCreatePod(t *testing.T, ns string, labels, annotations map[string]string, containers ...corev1.Container) *corev1.Pod {
	t.Helper()
	pod, err := createPod(t, ns, labels, annotations, containers...)
	if err != nil {
		t.Fatalf("creating a Pod in %s: %v", ns, err)
	}
	return pod
}

func via(name string) map[string]string { return map[string]string{v1alpha1.LabelEgressVia: name} }

func TestBoundNamespaceGetsTheProxyVariables(t *testing.T) {
	ns := namespace(t, via("egress"), nil)
	proxy(t, ns, "egress", 3128)
	pod := mustCreatePod(t, ns, nil, nil,
		corev1.Container{Name: "app", Image: "app"},
		corev1.Container{Name: "own", Image: "app", Env: []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://mine:1"}}})
	url := "http://egress." + ns + ".svc." + domain + ":3128"
	app, own := envOf(pod.Spec.Containers[0]), envOf(pod.Spec.Containers[1])
	for _, name := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		if app[name] != url {
			t.Errorf("%s = %q, want %q", name, app[name], url)
		}
	}
	if own["HTTPS_PROXY"] != "http://mine:1" || own["HTTP_PROXY"] != url {
		t.Errorf("a container's own HTTPS_PROXY is kept and the rest set: %v", own)
	}
	if app["NO_PROXY"] != app["no_proxy"] {
		t.Errorf("NO_PROXY %q and no_proxy %q differ", app["NO_PROXY"], app["no_proxy"])
	}
	noProxy := strings.Split(app["NO_PROXY"], ",")
	var kubernetes corev1.Service
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "kubernetes"}, &kubernetes); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"localhost", ".svc", "." + domain, kubernetes.Spec.ClusterIP, "172.30.0.0/16"} {
		if !slices.Contains(noProxy, want) {
			t.Errorf("NO_PROXY %q lacks %s", app["NO_PROXY"], want)
		}
	}
}

func TestUnboundNamespaceIsLeftAlone(t *testing.T) {
	ns := namespace(t, nil, nil)
	proxy(t, ns, "egress", 3128)
	pod := mustCreatePod(t, ns, nil, nil)
	if len(pod.Spec.Containers[0].Env) != 0 {
		t.Fatalf("a Pod of an unbound Namespace got %v", pod.Spec.Containers[0].Env)
	}
}

func TestPodLabelBindsAndWinsOverTheNamespace(t *testing.T) {
	unbound := namespace(t, nil, nil)
	proxy(t, unbound, "mine", 8080)
	pod := mustCreatePod(t, unbound, via("mine"), nil)
	if got := envOf(pod.Spec.Containers[0])["HTTP_PROXY"]; got != "http://mine."+unbound+".svc."+domain+":8080" {
		t.Errorf("a labelled Pod in an unbound Namespace: HTTP_PROXY = %q", got)
	}
	bound := namespace(t, via("shared"), nil)
	proxy(t, bound, "shared", 3128)
	proxy(t, bound, "mine", 8080)
	pod = mustCreatePod(t, bound, via("mine"), nil)
	if got := envOf(pod.Spec.Containers[0])["HTTP_PROXY"]; got != "http://mine."+bound+".svc."+domain+":8080" {
		t.Errorf("the Pod's label should win over its Namespace's: HTTP_PROXY = %q", got)
	}
}

func TestInitContainersAreBoundToo(t *testing.T) {
	ns := namespace(t, via("egress"), nil)
	proxy(t, ns, "egress", 3128)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "init", Namespace: ns},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "fetch", Image: "app"}},
			Containers:     []corev1.Container{{Name: "app", Image: "app"}},
		},
	}
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if envOf(pod.Spec.InitContainers[0])["HTTPS_PROXY"] == "" {
		t.Fatalf("the init container got no HTTPS_PROXY: %v", pod.Spec.InitContainers[0].Env)
	}
}

func TestNoProxyAnnotationsAddEntries(t *testing.T) {
	ns := namespace(t, via("egress"), map[string]string{v1alpha1.AnnotationNoProxy: "db.internal, 10.50.0.0/16"})
	proxy(t, ns, "egress", 3128)
	pod := mustCreatePod(t, ns, nil, map[string]string{v1alpha1.AnnotationNoProxy: ".corp.example"})
	noProxy := strings.Split(envOf(pod.Spec.Containers[0])["NO_PROXY"], ",")
	for _, want := range []string{"db.internal", "10.50.0.0/16", ".corp.example"} {
		if !slices.Contains(noProxy, want) {
			t.Errorf("NO_PROXY %v lacks %s", noProxy, want)
		}
	}
}

func TestBadBindingsAreRefusedNamingLabelOrAnnotation(t *testing.T) {
	missing := namespace(t, via("nope"), nil)
	badName := namespace(t, nil, nil)
	badAnnotation := namespace(t, via("egress"), nil)
	proxy(t, badAnnotation, "egress", 3128)
	for _, c := range []struct {
		name, ns    string
		labels      map[string]string
		annotations map[string]string
		want        string
	}{
		{"no such Proxy", missing, nil, nil, `label egressproxies.io/egress-via="nope" on Namespace ` + missing + `: no Proxy "nope" in namespace ` + missing},
		{"not a Proxy name", badName, via("Not_A_Name"), nil, `label egressproxies.io/egress-via="Not_A_Name" on Pod: not a Proxy name`},
		{"bad no-proxy", badAnnotation, nil, map[string]string{v1alpha1.AnnotationNoProxy: "10.0.0.0/40"}, `annotation egressproxies.io/no-proxy="10.0.0.0/40" on Pod: entry 1 "10.0.0.0/40" is not a network`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := createPod(t, c.ns, c.labels, c.annotations)
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("creating the Pod: %v; want it refused with %q", err, c.want)
			}
		})
	}
}

// The shipped selectors keep the webhook off kube-system and the
// operator's own namespace, whatever their labels: a down operator never
// blocks their Pods.
func TestSystemNamespacesAreNeverBound(t *testing.T) {
	for _, name := range []string{"kube-system", "egress-proxies-system"} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(ns), ns); apierrors.IsNotFound(err) {
			if err := k8s.Create(context.Background(), ns); err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		ns.Labels[v1alpha1.LabelEgressVia] = "nope"
		if err := k8s.Update(context.Background(), ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			delete(ns.Labels, v1alpha1.LabelEgressVia)
			_ = k8s.Update(context.Background(), ns)
		})
		// A binding to no Proxy would be refused: being admitted with no
		// variables shows the webhook was not called.
		pod := mustCreatePod(t, name, via("nope"), nil)
		if len(pod.Spec.Containers[0].Env) != 0 {
			t.Errorf("a Pod in %s got %v", name, pod.Spec.Containers[0].Env)
		}
	}
}

// The shipped sample Namespace, applied as a user would with its Proxy,
// binds a Pod created in it, with the sample's extra NO_PROXY entries.
func TestSampleNamespaceBindsItsPods(t *testing.T) {
	data, err := os.ReadFile(controllertest.Path("config", "samples", "namespace_bound.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var sample corev1.Namespace
	if err := yaml.UnmarshalStrict(data, &sample); err != nil {
		t.Fatal(err)
	}
	// A name of its own: envtest has no namespace controller, so a deleted
	// Namespace would never go away for the next run.
	ns := namespace(t, sample.Labels, sample.Annotations)
	proxy(t, ns, sample.Labels[v1alpha1.LabelEgressVia], 3128)
	env := envOf(mustCreatePod(t, ns, nil, nil).Spec.Containers[0])
	if env["HTTPS_PROXY"] != "http://partner."+ns+".svc."+domain+":3128" ||
		!strings.HasSuffix(env["NO_PROXY"], ",db.payments.internal,10.50.0.0/16") {
		t.Errorf("a Pod of the sample Namespace got %v", env)
	}
}
