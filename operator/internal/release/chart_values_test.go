package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Each value the chart offers reaches the object it is for.
func TestChartValues(t *testing.T) {
	providersFile := filepath.Join(t.TempDir(), "providers.yaml")
	providersConfig := "installID: lab1\nproviders: []\n"
	if err := os.WriteFile(providersFile, []byte(providersConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	const ns = "operators"
	defaultChecksum := checksum(t, helmTemplate(t, ns))
	count := func(objs []*unstructured.Unstructured, kind string) int {
		n := 0
		for _, o := range objs {
			if o.GetKind() == kind {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		name  string
		flags []string
		check func(t *testing.T, objs []*unstructured.Unstructured, c corev1.Container)
	}{
		{"image", []string{"--set", "image.repository=registry.example/egress-proxies-operator,image.tag=0.2.0-rc1,image.pullPolicy=Always"},
			func(t *testing.T, _ []*unstructured.Unstructured, c corev1.Container) {
				if c.Image != "registry.example/egress-proxies-operator:0.2.0-rc1" || c.ImagePullPolicy != corev1.PullAlways {
					t.Errorf("image %s, pull policy %s", c.Image, c.ImagePullPolicy)
				}
			}},
		{"replicas", []string{"--set", "replicas=3"},
			func(t *testing.T, objs []*unstructured.Unstructured, _ corev1.Container) {
				if r := deployment(t, objs).Spec.Replicas; r == nil || *r != 3 {
					t.Errorf("replicas %s", ptr(r))
				}
			}},
		{"credentials Secret", []string{"--set", "credentialsSecret.name=vsphere-lab"},
			func(t *testing.T, objs []*unstructured.Unstructured, _ corev1.Container) {
				if v := volume(t, objs, "credentials"); v.Secret == nil || v.Secret.SecretName != "vsphere-lab" {
					t.Errorf("credentials volume %+v", v.VolumeSource)
				}
			}},
		{"providers config", []string{"--set-file", "providersConfig=" + providersFile},
			func(t *testing.T, objs []*unstructured.Unstructured, _ corev1.Container) {
				cm := &corev1.ConfigMap{}
				only(t, objs, "ConfigMap", cm)
				if cm.Data["providers.yaml"] != providersConfig {
					t.Errorf("providers.yaml %q, want %q", cm.Data["providers.yaml"], providersConfig)
				}
				if checksum(t, objs) == defaultChecksum {
					t.Error("another providers config leaves the Pods' checksum: helm upgrade would not restart them")
				}
			}},
		{"metrics off", []string{"--set", "metrics.enabled=false"},
			func(t *testing.T, objs []*unstructured.Unstructured, c corev1.Container) {
				if count(objs, "Service") != 1 || slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" }) ||
					!slices.Contains(c.Args, "--metrics-bind-address=0") {
					t.Errorf("%d Services, ports %v, args %v", count(objs, "Service"), c.Ports, c.Args)
				}
			}},
		{"metrics over HTTP", []string{"--set", "metrics.secure=false,metrics.port=8080"},
			func(t *testing.T, objs []*unstructured.Unstructured, c corev1.Container) {
				svc := &corev1.Service{}
				named(t, objs, "Service", "egress-proxies-controller-manager-metrics-service", svc)
				if !slices.Contains(c.Args, "--metrics-secure=false") || !slices.Contains(c.Args, "--metrics-bind-address=:8080") ||
					svc.Spec.Ports[0].Name != "http" || svc.Spec.Ports[0].Port != 8080 || c.Ports[0].ContainerPort != 8080 {
					t.Errorf("args %v, container ports %v, Service ports %v", c.Args, c.Ports, svc.Spec.Ports)
				}
			}},
		{"metrics certificate", []string{"--set", "metrics.certSecret=metrics-tls"},
			func(t *testing.T, objs []*unstructured.Unstructured, c corev1.Container) {
				v := volume(t, objs, "metrics-cert")
				var dir string
				for _, m := range c.VolumeMounts {
					if m.Name == v.Name {
						dir = m.MountPath
					}
				}
				if v.Secret == nil || v.Secret.SecretName != "metrics-tls" || dir == "" || !slices.Contains(c.Args, "--metrics-cert-dir="+dir) {
					t.Errorf("volume %+v at %q, args %v", v.VolumeSource, dir, c.Args)
				}
			}},
		{"Pod binding off", []string{"--set", "podBinding.enabled=false"},
			func(t *testing.T, objs []*unstructured.Unstructured, c corev1.Container) {
				if n := count(objs, "MutatingWebhookConfiguration") + count(objs, "Secret"); n != 0 || len(c.Ports) != 1 || arg(c.Args, "webhook-port") != "" {
					t.Errorf("%d webhook configurations and Secrets, ports %v, args %v", n, c.Ports, c.Args)
				}
				for _, v := range deployment(t, objs).Spec.Template.Spec.Volumes {
					if v.Name == "webhook-cert" {
						t.Errorf("the webhook's certificate is still mounted: %+v", v)
					}
				}
			}},
		{"Pod binding domain and networks", []string{"--set", "podBinding.clusterDomain=corp.internal,podBinding.noProxy={10.96.0.0/12,10.244.0.0/16}"},
			func(t *testing.T, _ []*unstructured.Unstructured, c corev1.Container) {
				if arg(c.Args, "cluster-domain") != "corp.internal" || arg(c.Args, "no-proxy") != "10.96.0.0/12,10.244.0.0/16" {
					t.Errorf("args %v", c.Args)
				}
			}},
		{"no PodDisruptionBudget", []string{"--set", "podDisruptionBudget.enabled=false"},
			func(t *testing.T, objs []*unstructured.Unstructured, _ corev1.Container) {
				if n := count(objs, "PodDisruptionBudget"); n != 0 {
					t.Errorf("%d PodDisruptionBudgets", n)
				}
			}},
		{"extra args", []string{"--set", "extraArgs={--zap-log-level=debug}"},
			func(t *testing.T, _ []*unstructured.Unstructured, c corev1.Container) {
				if !slices.Contains(c.Args, "--zap-log-level=debug") {
					t.Errorf("args %v", c.Args)
				}
			}},
		{"environment", []string{"--set", "env[0].name=OTEL_TRACES_EXPORTER,env[0].value=otlp"},
			func(t *testing.T, _ []*unstructured.Unstructured, c corev1.Container) {
				if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "OTEL_TRACES_EXPORTER" && e.Value == "otlp" }) ||
					!slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "POD_NAMESPACE" }) {
					t.Errorf("env %v: want OTEL_TRACES_EXPORTER beside POD_NAMESPACE", c.Env)
				}
			}},
		{"environment without the Pod binding", []string{"--set", "podBinding.enabled=false,env[0].name=OTEL_TRACES_SAMPLER,env[0].value=parentbased_always_off"},
			func(t *testing.T, _ []*unstructured.Unstructured, c corev1.Container) {
				if len(c.Env) != 1 || c.Env[0].Name != "OTEL_TRACES_SAMPLER" {
					t.Errorf("env %v", c.Env)
				}
			}},
		{"image pull secrets, priority class, topology spread", []string{"--set", "imagePullSecrets[0].name=registry,priorityClassName=egress-critical," +
			"topologySpreadConstraints[0].maxSkew=1,topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone,topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway"},
			func(t *testing.T, objs []*unstructured.Unstructured, _ corev1.Container) {
				pod := deployment(t, objs).Spec.Template.Spec
				if len(pod.ImagePullSecrets) != 1 || pod.ImagePullSecrets[0].Name != "registry" || pod.PriorityClassName != "egress-critical" ||
					len(pod.TopologySpreadConstraints) != 1 || pod.TopologySpreadConstraints[0].TopologyKey != "topology.kubernetes.io/zone" {
					t.Errorf("pull secrets %v, priority class %q, topology spread %v", pod.ImagePullSecrets, pod.PriorityClassName, pod.TopologySpreadConstraints)
				}
			}},
		{"no priority class", []string{"--set", "priorityClassName="},
			func(t *testing.T, objs []*unstructured.Unstructured, _ corev1.Container) {
				if pc := deployment(t, objs).Spec.Template.Spec.PriorityClassName; pc != "" {
					t.Errorf("priority class %q", pc)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := helmTemplate(t, ns, tc.flags...)
			dep := deployment(t, objs)
			if dep.Namespace != ns {
				t.Errorf("the Deployment is in %q, want the release's namespace %q", dep.Namespace, ns)
			}
			tc.check(t, objs, dep.Spec.Template.Spec.Containers[0])
		})
	}
}

// checksum is the providers config's checksum on the Pods.
func checksum(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	return deployment(t, objs).Spec.Template.Annotations["checksum/providers-config"]
}

// volume is the Deployment's volume of that name.
func volume(t *testing.T, objs []*unstructured.Unstructured, name string) corev1.Volume {
	t.Helper()
	for _, v := range deployment(t, objs).Spec.Template.Spec.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("the Deployment has no volume %s", name)
	return corev1.Volume{}
}

// The operator is on the egress data path (it alone takes a dead proxy VM
// out of its Service), so it is scheduled ahead of workloads, as Karpenter
// ships: system-cluster-critical.
func TestOperatorIsClusterCritical(t *testing.T) {
	if pc := deployment(t, render(t)).Spec.Template.Spec.PriorityClassName; pc != "system-cluster-critical" {
		t.Errorf("priorityClassName %q, want system-cluster-critical", pc)
	}
}

// values.schema.json refuses a value the chart does not have, a misspelled
// one among them, and a value of the wrong type, naming it; Helm would
// otherwise drop it silently.
func TestChartRefusesUnknownValues(t *testing.T) {
	for _, tc := range []struct{ set, names string }{
		{"replica=3", "replica"},
		{"metrics.enable=false", "enable"},
		{"monitoring.serviceMonitor.enbled=true", "enbled"},
		{"podBinding.noproxy={10.0.0.0/8}", "noproxy"},
		{"replicas=two", "replicas"},
		{"metrics.port=70000", "port"},
		{"env[0].name=OTEL_SDK_DISABLED,env[0].value=true", "value"},
	} {
		args := []string{"template", "egress-proxies", chartDir, "--namespace", "operators", "--set", tc.set}
		out, err := exec.CommandContext(t.Context(), tool(t, "HELM"), args...).CombinedOutput()
		if err == nil {
			t.Errorf("--set %s: rendered; want refused", tc.set)
			continue
		}
		if !strings.Contains(string(out), "values don't meet the specifications of the schema") || !strings.Contains(string(out), tc.names) {
			t.Errorf("--set %s: %s; want a schema error naming %s", tc.set, out, tc.names)
		}
	}
}
