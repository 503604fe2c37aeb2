package endpoints

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// CacheOptions narrows the manager's cache to the Services and
// EndpointSlices carrying v1alpha1.LabelProxy. An object the cache does not hold
// reads as NotFound through the manager's client; claim asks the API
// server before taking that for absence.
func CacheOptions() cache.Options {
	exists, err := labels.NewRequirement(v1alpha1.LabelProxy, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant key: cannot fail
	}
	ours := cache.ByObject{Label: labels.NewSelector().Add(*exists)}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Service{}:            ours,
		&discoveryv1.EndpointSlice{}: ours,
	}}
}

// ConflictError says an object the Proxy needs under its name exists and
// is not the Proxy's.
type ConflictError struct {
	kind, namespace, name string
	// owner says who the object belongs to, as far as it tells.
	owner string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s %s/%s exists and was not created by this operator for this Proxy (%s); it is left untouched: delete it, or give the Proxy another name",
		e.kind, e.namespace, e.name, e.owner)
}

// describeOwner says who owns obj: its controller, else its owners, else
// the manager named by its labels.
func describeOwner(obj client.Object) string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return fmt.Sprintf("it is controlled by %s %s, uid %s", ref.Kind, ref.Name, ref.UID)
	}
	if refs := obj.GetOwnerReferences(); len(refs) > 0 {
		return fmt.Sprintf("it is owned by %s %s, uid %s", refs[0].Kind, refs[0].Name, refs[0].UID)
	}
	for _, key := range []string{"app.kubernetes.io/managed-by", discoveryv1.LabelManagedBy} {
		if v := obj.GetLabels()[key]; v != "" {
			return fmt.Sprintf("it has no owner; %s=%s", key, v)
		}
	}
	return "it has no owner"
}

// claim reads the object of obj's name into obj and reports whether it
// exists. The cache holds only labelled objects, so one it lacks is read
// from the API server: absent, or made by the previous release (the
// Proxy's controller reference, no label yet), or someone else's. An
// object not controlled by the Proxy — compared by UID — is a
// *ConflictError, and the operator writes nothing.
func (p *Publisher) claim(ctx context.Context, proxy *v1alpha1.Proxy, obj client.Object, kind string) (bool, error) {
	key := client.ObjectKeyFromObject(obj)
	err := p.Client.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		err = p.Reader.Get(ctx, key, obj)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
	}
	if err != nil {
		return false, fmt.Errorf("reading %s %s: %w", kind, key, err)
	}
	if !metav1.IsControlledBy(obj, proxy) {
		return true, &ConflictError{kind: kind, namespace: key.Namespace, name: key.Name, owner: describeOwner(obj)}
	}
	return true, nil
}

// write makes obj what mutate says, labelled and controlled by the Proxy:
// it creates obj, or patches the Proxy's own copy when that differs — a
// merge patch from the copy as read, conditional on its resourceVersion,
// so a change made since conflicts and is reconciled again.
func (p *Publisher) write(ctx context.Context, proxy *v1alpha1.Proxy, obj client.Object, exists bool, mutate func()) error {
	before := obj.DeepCopyObject().(client.Object)
	mutate()
	lbls := obj.GetLabels()
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[v1alpha1.LabelProxy] = proxy.Name
	obj.SetLabels(lbls)
	if err := controllerutil.SetControllerReference(proxy, obj, p.Scheme); err != nil {
		return err
	}
	switch {
	case !exists:
		return p.Client.Create(ctx, obj)
	case equality.Semantic.DeepEqual(before, obj):
		return nil
	default:
		return p.Client.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	}
}

// AsConflict returns the conflict err holds, if any.
func AsConflict(err error) *ConflictError {
	var c *ConflictError
	if errors.As(err, &c) {
		return c
	}
	return nil
}
