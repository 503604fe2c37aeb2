package identity

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// namespaceReader answers Get of kube-system with uid, or with err; any
// other read fails the test.
type namespaceReader struct {
	t   *testing.T
	uid types.UID
	err error
}

func (r namespaceReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	ns, ok := obj.(*corev1.Namespace)
	if !ok || key.Name != ClusterNamespace || key.Namespace != "" {
		r.t.Fatalf("read %T %v, want the %s Namespace", obj, key, ClusterNamespace)
	}
	ns.UID = r.uid
	return r.err
}

func (r namespaceReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	r.t.Fatal("List called")
	return nil
}

func TestResolve(t *testing.T) {
	ctx := context.Background()
	got, err := Resolve(ctx, namespaceReader{t: t, uid: "C0FFEE12-5a0c-4c43-9d2e-6f0e2b1a7c55"}, "")
	if err != nil || got != "c0ffee12" {
		t.Errorf("derived %q, %v; want c0ffee12, the first 8 hex digits of the UID", got, err)
	}
	got, err = Resolve(ctx, namespaceReader{t: t, err: errors.New("must not be read")}, "prod1")
	if err != nil || got != "prod1" {
		t.Errorf("configured prod1: %q, %v", got, err)
	}
	if _, err := Resolve(ctx, namespaceReader{t: t}, "Prod-1"); err == nil || !strings.Contains(err.Error(), `installID "Prod-1"`) {
		t.Errorf("a bad configured ID: %v", err)
	}
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, ClusterNamespace)
	if _, err := Resolve(ctx, namespaceReader{t: t, err: notFound}, ""); err == nil ||
		!strings.Contains(err.Error(), "kube-system Namespace's UID") || !strings.Contains(err.Error(), "set installID") {
		t.Errorf("an unreadable kube-system: %v; want it named, and installID offered", err)
	}
	if _, err := Resolve(ctx, namespaceReader{t: t, uid: "abc"}, ""); err == nil || !strings.Contains(err.Error(), `"abc" is too short`) {
		t.Errorf("a short UID: %v", err)
	}
}

func TestOwner(t *testing.T) {
	if got := Owner("c0ffee12", "lab"); got != "c0ffee12-lab" {
		t.Errorf("Owner = %q", got)
	}
}
