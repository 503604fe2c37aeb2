package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// mountedSecret is the credentials Secret the Deployment mounts.
func mountedSecret(t *testing.T) (name, namespace string) {
	t.Helper()
	dep := deployment(t, render(t))
	name = secretMountedAt(t, dep, "/etc/egress-proxies/credentials")
	if name == "" {
		t.Fatal("the Deployment mounts no Secret at the credentials directory")
	}
	return name, dep.Namespace
}

// secretMountedAt is the Secret the operator's container mounts at path,
// or "".
func secretMountedAt(t *testing.T, dep *appsv1.Deployment, path string) string {
	t.Helper()
	if v := volumeMountedAt(dep, path); v != nil && v.Secret != nil {
		return v.Secret.SecretName
	}
	return ""
}

// volumeMountedAt is the volume the operator's container mounts at path,
// or nil.
func volumeMountedAt(dep *appsv1.Deployment, path string) *corev1.Volume {
	for _, m := range dep.Spec.Template.Spec.Containers[0].VolumeMounts {
		if m.MountPath != path {
			continue
		}
		for i, v := range dep.Spec.Template.Spec.Volumes {
			if v.Name == m.Name {
				return &dep.Spec.Template.Spec.Volumes[i]
			}
		}
	}
	return nil
}

// The Secret `make <type>-secret` prints (hack/credentials-secret.sh) is
// the one the installed Deployment mounts, in its namespace: credentials
// made as the docs say reach the operator.
func TestCredentialsSecretIsTheOneMounted(t *testing.T) {
	name, namespace := mountedSecret(t)
	file := filepath.Join(t.TempDir(), "vsphere-username")
	if err := os.WriteFile(file, []byte("user"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), filepath.Join(repoRoot, "hack", "credentials-secret.sh"), "vsphere-username="+file)
	cmd.Env = append(os.Environ(), "NAME=", "NAMESPACE=") // the helper's defaults
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("credentials-secret.sh: %v", err)
	}
	var secret corev1.Secret
	if err := yaml.Unmarshal(out, &secret); err != nil {
		t.Fatalf("credentials-secret.sh printed %v:\n%s", err, out)
	}
	if secret.Name != name || secret.Namespace != namespace {
		t.Errorf("make <type>-secret makes Secret %s/%s; the Deployment mounts %s/%s", secret.Namespace, secret.Name, namespace, name)
	}
}

// secretMention is any name of a provider credentials Secret in prose or
// a sample.
var secretMention = regexp.MustCompile(`[-a-z0-9]*provider-credentials\b`)

// The docs, the README and the samples name the credentials Secret as the
// Deployment mounts it.
func TestDocsNameTheMountedSecret(t *testing.T) {
	name, _ := mountedSecret(t)
	var files []string
	for _, glob := range []string{"docs/*.md", "README.md", "operator/config/samples/*.yaml", "charts/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(repoRoot, glob))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range secretMention.FindAll(raw, -1) {
			if string(m) != name {
				t.Errorf("%s names Secret %q; the Deployment mounts %q", f, m, name)
			}
		}
	}
}
