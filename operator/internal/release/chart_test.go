package release

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// chartDir is the Helm chart, kept by hand beside operator/config.
var chartDir = filepath.Join(repoRoot, "charts", "egress-proxies-operator")

// minKubeVersion is the oldest Kubernetes the install supports
// (docs/install.md); the chart is rendered for it.
const minKubeVersion = "1.31.0"

// helmTemplate renders the chart into namespace with extra helm flags.
func helmTemplate(t *testing.T, namespace string, flags ...string) []*unstructured.Unstructured {
	t.Helper()
	args := append([]string{"template", "egress-proxies", chartDir, "--namespace", namespace, "--include-crds", "--kube-version", minKubeVersion}, flags...)
	return parse(t, run(t, nil, tool(t, "HELM"), args...))
}

// helmOnly are what the chart adds for Helm's sake, which the release
// manifests have no use for: its bookkeeping labels, and the checksum
// that rolls the Pods when `helm upgrade` changes the providers config.
var (
	helmOnlyLabels      = []string{"helm.sh/chart", "app.kubernetes.io/managed-by"}
	helmOnlyAnnotations = []string{"checksum/providers-config"}
)

// key names an object.
func key(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
}

// withoutHelmOnly drops helmOnly from o (and maps they leave empty).
func withoutHelmOnly(o *unstructured.Unstructured) map[string]any {
	o = o.DeepCopy()
	drop := func(fields []string, keys []string) {
		m, _, _ := unstructured.NestedStringMap(o.Object, fields...)
		for _, k := range keys {
			delete(m, k)
		}
		if len(m) == 0 {
			unstructured.RemoveNestedField(o.Object, fields...)
		} else {
			_ = unstructured.SetNestedStringMap(o.Object, m, fields...)
		}
	}
	drop([]string{"metadata", "labels"}, helmOnlyLabels)
	drop([]string{"spec", "template", "metadata", "annotations"}, helmOnlyAnnotations)
	return o.Object
}

// The chart with its default values renders the objects of the release
// manifests (dist/install.yaml), field for field, but for the Namespace
// (helm install --create-namespace makes it) and what Helm alone needs.
func TestChartRendersTheReleaseManifests(t *testing.T) {
	want := map[string]map[string]any{}
	namespace := ""
	for _, o := range render(t) {
		if o.GetKind() == "Namespace" {
			namespace = o.GetName()
			continue
		}
		want[key(o)] = withoutHelmOnly(o)
	}
	got := map[string]map[string]any{}
	for _, o := range helmTemplate(t, namespace) {
		if _, dup := got[key(o)]; dup {
			t.Errorf("the chart renders %s twice", key(o))
		}
		got[key(o)] = withoutHelmOnly(o)
	}
	sameObjects(t, "the release manifests", want, got)
}

// sameObjects fails the test for each object of want the chart's got
// lacks or renders otherwise, and each it renders that want (what the
// manifests of source render) does not have.
func sameObjects(t *testing.T, source string, want, got map[string]map[string]any) {
	t.Helper()
	for _, k := range sortedKeys(want) {
		if _, ok := got[k]; !ok {
			t.Errorf("the chart does not render %s", k)
			continue
		}
		for _, d := range diff("", want[k], got[k]) {
			t.Errorf("%s: %s", k, d)
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok {
			t.Errorf("the chart renders %s, which %s do not have", k, source)
		}
	}
}

// The chart's version and appVersion (its default image tag) are the
// release's.
func TestChartVersionIsTheRelease(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(raw, &chart); err != nil {
		t.Fatal(err)
	}
	if v := version(t); chart.Version != v || chart.AppVersion != v {
		t.Errorf("Chart.yaml has version %q, appVersion %q; VERSION is %q", chart.Version, chart.AppVersion, v)
	}
}

// helm lint --strict finds nothing to warn about.
func TestChartLints(t *testing.T) {
	run(t, nil, tool(t, "HELM"), "lint", "--strict", chartDir)
}

// diff lists where got differs from want, by path.
func diff(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		var out []string
		keys := sortedKeys(w)
		for k := range g {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			out = append(out, diff(path+"."+k, w[k], g[k])...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			break
		}
		var out []string
		for i := range w {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return out
	}
	if reflect.DeepEqual(want, got) {
		return nil
	}
	return []string{fmt.Sprintf("%s: release manifests %s, chart %s", strings.TrimPrefix(path, "."), show(want), show(got))}
}

func show(v any) string {
	if v == nil {
		return "(none)"
	}
	raw, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(string(raw))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
