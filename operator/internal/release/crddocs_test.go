package release

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// `kubectl explain` shows a field's description and nothing else: every
// field of every installed CRD has one. Items of a list and values of a
// map are explained by their field; metadata by Kubernetes.
func TestEveryCRDFieldIsExplained(t *testing.T) {
	crds := 0
	for _, crd := range render(t) {
		if crd.GetKind() != "CustomResourceDefinition" {
			continue
		}
		crds++
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, v := range versions {
			schema, _, _ := unstructured.NestedMap(v.(map[string]any), "schema", "openAPIV3Schema")
			// The object's metadata is Kubernetes' ObjectMeta, explained
			// by kubectl from the API server's own schema.
			unstructured.RemoveNestedField(schema, "properties", "metadata")
			for _, path := range unexplained(schema, crd.GetName()) {
				t.Errorf("%s: no description: kubectl explain shows nothing for it", path)
			}
		}
	}
	if crds < 4 {
		t.Fatalf("%d CRDs rendered, want the four", crds)
	}
}

// unexplained lists the properties under schema (at path) without a
// description.
func unexplained(schema map[string]any, path string) []string {
	var out []string
	props, _ := schema["properties"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(props)) {
		child, _ := props[name].(map[string]any)
		at := path + "." + name
		if d, _ := child["description"].(string); strings.TrimSpace(d) == "" {
			out = append(out, at)
		}
		out = append(out, unexplained(child, at)...)
	}
	if items, ok := schema["items"].(map[string]any); ok {
		out = append(out, unexplained(items, path+"[]")...)
	}
	if values, ok := schema["additionalProperties"].(map[string]any); ok {
		out = append(out, unexplained(values, path+"{}")...)
	}
	return out
}

// The Proxy's conditions field names every condition type a Proxy has.
func TestProxyConditionsExplainEveryType(t *testing.T) {
	for _, crd := range render(t) {
		if crd.GetKind() != "CustomResourceDefinition" || crd.GetName() != "proxies.egressproxies.io" {
			continue
		}
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		d, _, _ := unstructured.NestedString(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "status", "properties", "conditions", "description")
		for _, c := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionProvisioned, v1alpha1.ConditionCloudInitCurrent, v1alpha1.ConditionAddressesAllocated, v1alpha1.ConditionDegraded} {
			if !strings.Contains(d, c) {
				t.Errorf("status.conditions does not name %s: %q", c, d)
			}
		}
		return
	}
	t.Fatal("no Proxy CRD rendered")
}
