package release

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// repoRoot is the repository's top, from this package's directory.
const repoRoot = "../../.."

// tool is the path of a pinned tool the Makefile installs and names in
// the environment (make test/operator sets both).
func tool(t *testing.T, env string) string {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		t.Fatalf("%s is not set: run through `make test/operator`, or export %s=$(make -s %s-path)", env, env, strings.ToLower(env))
	}
	return path
}

// render returns the objects of the install manifests as make
// release-manifests writes them, for the VERSION file's release.
func render(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	return parse(t, run(t, []string{"KUSTOMIZE=" + tool(t, "KUSTOMIZE"), "VERSION="}, filepath.Join(repoRoot, "hack", "release-manifests.sh")))
}

// run runs a command with env added to the test's and returns its
// output, failing the test with its stderr.
func run(t *testing.T, env []string, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", filepath.Base(name), args, err, stderr.Bytes())
	}
	return out
}

// parse splits a multi-document YAML stream into objects, skipping empty
// documents.
func parse(t *testing.T, stream []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split("\n"+string(stream), "\n---") {
		obj := &unstructured.Unstructured{}
		// The split took the line break that ends a document's last
		// line, and with it the last line break of a block scalar there.
		if err := yaml.Unmarshal([]byte(doc+"\n"), &obj.Object); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
	return objs
}

// only returns the one object of kind in objs, converted into out.
func only(t *testing.T, objs []*unstructured.Unstructured, kind string, out any) {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("the install has %d objects of kind %s, want 1", len(found), kind)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(found[0].Object, out); err != nil {
		t.Fatalf("%s %s: %v", kind, found[0].GetName(), err)
	}
}

// named converts the install's object of kind and name into out, and
// fails the test when there is none.
func named(t *testing.T, objs []*unstructured.Unstructured, kind, name string, out any) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			return
		}
	}
	t.Fatalf("the install has no %s %s", kind, name)
}

// deployment returns the operator's Deployment.
func deployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	dep := &appsv1.Deployment{}
	only(t, objs, "Deployment", dep)
	return dep
}
