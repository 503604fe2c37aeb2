package release

import (
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A rule added to a CRD must never strand the objects admitted before it:
// a rule on the root (the whole object: metadata.name) that ran on every
// update would refuse every write to an object that breaks it, its
// status, its finalizer's removal, so `kubectl delete` left it
// Terminating for good. The install's CRDs are applied over CRDs without
// their root rules, under a Proxy and an AddressPool whose names break
// them, each with a finalizer: the status is written, a label added, and
// each is deleted and goes once its finalizer is removed; a new object
// with such a name is still refused.
func TestCRDUpgradeStrandsNoObject(t *testing.T) {
	c := startAPIServer(t)
	ctx := t.Context()
	apply := func(o *unstructured.Unstructured) {
		t.Helper()
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
			t.Fatalf("%s: %v", key(o), err)
		}
	}
	var crds []*unstructured.Unstructured
	for _, o := range render(t) {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
		}
	}
	// Before: the CRDs without their root-level rules.
	for _, crd := range crds {
		before := crd.DeepCopy()
		versions, _, _ := unstructured.NestedSlice(before.Object, "spec", "versions")
		for _, v := range versions {
			unstructured.RemoveNestedField(v.(map[string]any), "schema", "openAPIV3Schema", "x-kubernetes-validations")
		}
		if err := unstructured.SetNestedSlice(before.Object, versions, "spec", "versions"); err != nil {
			t.Fatal(err)
		}
		apply(before)
	}
	objects := []*unstructured.Unstructured{
		object("Proxy", "1stranded", "default", map[string]any{
			"provider": "lab", "port": int64(3128), "placement": map[string]any{"region": "r1", "machineType": "small", "image": "debian-12"},
		}),
		object("AddressPool", "1stranded-pool-of-a-name-too-long-for-its-addresses", "", map[string]any{
			"provider": "lab", "addresses": []any{"192.0.2.10-192.0.2.20"},
			"prefix": int64(24), "gateway": "192.0.2.1",
		}),
	}
	// The API server serves a CRD's new schema a moment after its write:
	// each step waits until it does.
	for _, o := range objects {
		o.SetFinalizers([]string{"egressproxies.io/test"}) // as the operator's own finalizer would be
		eventually(t, "creating "+key(o)+" before the rule", func() error { return c.Create(ctx, o.DeepCopy()) })
	}
	// The upgrade.
	for _, crd := range crds {
		apply(crd)
	}
	for _, o := range objects {
		probe := o.DeepCopy()
		probe.SetName("9" + o.GetName()[1:] + "-probe")
		eventually(t, "the upgraded "+o.GetKind()+" refusing a new object of such a name", func() error {
			err := c.Create(ctx, probe.DeepCopy())
			if err == nil {
				_ = c.Delete(ctx, probe.DeepCopy())
				return errors.New("accepted")
			}
			if !strings.Contains(err.Error(), "metadata.name") {
				return err
			}
			return nil
		})
	}
	for _, o := range objects {
		obj := o.DeepCopy()
		for _, step := range []struct {
			what string
			do   func() error
		}{
			{"a status write", func() error {
				return c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType,
					[]byte(`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Pending","message":"admitted before the rule","lastTransitionTime":"2026-12-03T00:00:00Z"}]}}`)))
			}},
			{"adding a label", func() error {
				return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`)))
			}},
			{"the delete", func() error { return c.Delete(ctx, obj) }},
			{"removing the finalizer", func() error {
				return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
			}},
		} {
			if err := step.do(); err != nil {
				t.Errorf("%s of %s, admitted before the rule, after the upgrade: %v", step.what, key(o), err)
			}
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%s after its delete and its finalizer's removal: %v (finalizers %v)", key(o), err, obj.GetFinalizers())
		}
	}
}

// eventually retries step every 100 ms for up to 20 s until it returns nil.
func eventually(t *testing.T, what string, step func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := step()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func object(kind, name, namespace string, spec map[string]any) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "egressproxies.io/v1alpha1", "kind": kind, "spec": spec}}
	o.SetName(name)
	o.SetNamespace(namespace)
	return o
}
