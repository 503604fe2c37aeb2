package app

import (
	"context"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// App teams use Proxies through Kubernetes' own roles: the shipped
// egress-proxies-editor and -viewer ClusterRoles carry the labels the
// API server's bootstrap admin, edit and view roles aggregate by, and,
// bound in a namespace as those roles are, let a namespace's editor create
// and delete Proxies there and nowhere else, and a viewer only read them.
// On the real API server with RBAC; kube-controller-manager, which fills
// the aggregated roles, does not run under envtest, so the aggregation is
// checked against the bootstrap roles' own selectors.
func TestTenantRolesAggregateAndBindPerNamespace(t *testing.T) {
	cfg, admin := startAPIServer(t)
	ctx := context.Background()
	var in install
	readYAML(t, filepath.Join(configDir, "default", "kustomization.yaml"), &in)

	roles := map[string]*rbacv1.ClusterRole{}
	for _, file := range []string{"editor_role.yaml", "viewer_role.yaml"} {
		for _, obj := range documents(t, filepath.Join(configDir, "rbac", file)) {
			obj = in.transform(obj)
			apply(t, admin, obj)
			var role rbacv1.ClusterRole
			if err := admin.Get(ctx, client.ObjectKey{Name: obj.GetName()}, &role); err != nil {
				t.Fatal(err)
			}
			roles[role.Name] = &role
		}
	}
	editor, viewer := roles["egress-proxies-editor"], roles["egress-proxies-viewer"]
	if editor == nil || viewer == nil {
		t.Fatalf("installed roles %v; want egress-proxies-editor and egress-proxies-viewer", roles)
	}
	for aggregate, want := range map[string]map[*rbacv1.ClusterRole]bool{
		"admin": {editor: true, viewer: true}, "edit": {editor: true, viewer: true}, "view": {editor: false, viewer: true},
	} {
		var bootstrap rbacv1.ClusterRole
		if err := admin.Get(ctx, client.ObjectKey{Name: aggregate}, &bootstrap); err != nil {
			t.Fatal(err)
		}
		for role, aggregated := range want {
			if got := aggregatedInto(t, &bootstrap, role); got != aggregated {
				t.Errorf("%s aggregated into %s: %v, want %v (its labels %v)", role.Name, aggregate, got, aggregated, role.Labels)
			}
		}
	}

	for _, ns := range []string{"team-a", "team-b"} {
		apply(t, admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	bind := func(user, role string) client.Client {
		apply(t, admin, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: "team-a"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}})
		as := rest.CopyConfig(cfg)
		as.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
		c, err := client.New(as, client.Options{Scheme: NewScheme()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	alice, bob := bind("alice", editor.Name), bind("bob", viewer.Name)
	proxyIn := func(ns, name string) *v1alpha1.Proxy {
		return &v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.ProxySpec{Provider: "lab", Port: 3128, Placement: v1alpha1.Placement{Region: "r1", MachineType: "small", Image: "debian-12"}}}
	}
	if err := alice.Create(ctx, proxyIn("team-a", "partner")); err != nil {
		t.Errorf("the editor creating a Proxy in her namespace: %v", err)
	}
	if err := alice.Create(ctx, proxyIn("team-b", "partner")); !apierrors.IsForbidden(err) {
		t.Errorf("the editor creating a Proxy in another namespace: %v, want Forbidden", err)
	}
	var list v1alpha1.ProxyList
	if err := bob.List(ctx, &list, client.InNamespace("team-a")); err != nil || len(list.Items) != 1 {
		t.Errorf("the viewer listing his namespace's Proxies: %d, %v; want the one", len(list.Items), err)
	}
	if err := bob.Create(ctx, proxyIn("team-a", "mine")); !apierrors.IsForbidden(err) {
		t.Errorf("the viewer creating a Proxy: %v, want Forbidden", err)
	}
	if err := bob.Delete(ctx, proxyIn("team-a", "partner")); !apierrors.IsForbidden(err) {
		t.Errorf("the viewer deleting a Proxy: %v, want Forbidden", err)
	}
	if err := alice.Delete(ctx, proxyIn("team-a", "partner")); err != nil {
		t.Errorf("the editor deleting her Proxy: %v", err)
	}
}

// aggregatedInto reports whether the aggregated role's selectors, as
// kube-controller-manager's clusterrole-aggregation controller reads them,
// select role.
func aggregatedInto(t *testing.T, aggregated, role *rbacv1.ClusterRole) bool {
	t.Helper()
	if aggregated.AggregationRule == nil {
		t.Fatalf("%s has no aggregation rule", aggregated.Name)
	}
	for _, s := range aggregated.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&s)
		if err != nil {
			t.Fatal(err)
		}
		if sel.Matches(labels.Set(role.Labels)) {
			return true
		}
	}
	return false
}
