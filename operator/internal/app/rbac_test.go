package app

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest/memprovider"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller/proxy"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metricstest"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/probe"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/probe/probetest"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/userdata"
)

// The operator as installed: app.Run against a real API server with RBAC,
// authenticated as the install's ServiceAccount and authorised only by
// the shipped roles (config/rbac, named and namespaced as
// config/default's kustomization does). It elects a leader and records
// the election's events, serves its metrics only to callers bound to the
// metrics reader, reads no Secret until an admin binds the cloud-init
// reader in the Proxy's namespace, and says which RoleBinding to create
// until then.

const configDir = "../../config"

// install is where and under which names config/default puts the rbac
// resources.
type install struct {
	Namespace  string `json:"namespace"`
	NamePrefix string `json:"namePrefix"`
}

// startAPIServer starts a kube-apiserver (with RBAC) and etcd with the
// operator's CRDs for the test, and returns its config and an admin's
// client.
func startAPIServer(t *testing.T) (*rest.Config, client.Client) {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run through `make test/operator`, or export KUBEBUILDER_ASSETS=$(hack/control-plane.sh)")
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join(configDir, "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	admin, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, admin
}

func TestOperatorUnderTheShippedRBAC(t *testing.T) {
	cfg, admin := startAPIServer(t)
	ctx := context.Background()
	logf.SetLogger(logr.Discard())

	var in install
	readYAML(t, filepath.Join(configDir, "default", "kustomization.yaml"), &in)
	apply(t, admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: in.Namespace}})
	var rbac struct {
		Resources []string `json:"resources"`
	}
	readYAML(t, filepath.Join(configDir, "rbac", "kustomization.yaml"), &rbac)
	for _, file := range rbac.Resources {
		for _, obj := range documents(t, filepath.Join(configDir, "rbac", file)) {
			apply(t, admin, in.transform(obj))
		}
	}

	cloud := memprovider.NewCloud("rbac-test", []string{"r1"}, []string{"debian-12-proxy"}, 0)
	providersConfig := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(providersConfig, []byte(`providers:
  - name: dev
    type: memory
    memory:
      regions: [r1]
      machineTypes: {small: {cpus: 1, memoryMiB: 512}}
      images: {debian-12: debian-12-proxy}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := providers.Registry{}
	reg.Register(providers.Typed(memprovider.Type,
		func(c memprovider.Config) error { c.Token = "rbac-test"; return c.Validate() },
		func(c memprovider.Config) (contract.Provider, error) {
			c.Token = "rbac-test"
			return memprovider.New(c, cloud)
		}))
	standIn := standInProxy(t)

	operator := rest.CopyConfig(cfg)
	operator.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%scontroller-manager", in.Namespace, in.NamePrefix),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + in.Namespace, "system:authenticated"},
	}
	metricsAddr := metricstest.FreeAddr(t)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(runCtx, Options{
			ConfigPath: providersConfig, Registry: reg,
			RestConfig:  func() (*rest.Config, error) { return operator, nil },
			MetricsAddr: metricsAddr, SecureMetrics: true, ProbeAddr: "0",
			LeaderElect: true, LeaderElectionNamespace: in.Namespace,
			Prober: probe.HTTPProxy{Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, standIn)
			}, Timeout: time.Second},
			Timing: proxy.Timing{Poll: 100 * time.Millisecond, Resync: 300 * time.Millisecond},
		})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("the operator stopped with %v", err)
		}
		// Stopped gently, the leader hands its Lease over (with the
		// shipped Role's rights): a rollout's next replica need not wait
		// out the Lease's duration.
		var lease coordinationv1.Lease
		key := client.ObjectKey{Namespace: in.Namespace, Name: leaderElectionID}
		if err := admin.Get(context.Background(), key, &lease); err != nil {
			t.Errorf("the leader Lease: %v", err)
		} else if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
			t.Errorf("the Lease is still held by %q after the operator stopped: the next replica waits out its %ds", *h, ptr.Deref(lease.Spec.LeaseDurationSeconds, 0))
		}
	})

	// Leader election records its events in the operator's namespace.
	eventually(t, "the leader election's event", func() bool {
		var list corev1.EventList
		if err := admin.List(ctx, &list, client.InNamespace(in.Namespace)); err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(list.Items, func(e corev1.Event) bool { return e.Reason == "LeaderElection" })
	})

	checkMetricsAuth(t, admin, in, metricsAddr)

	// The sample Proxy with its own cloud-init, without the sample's
	// RoleBinding: the operator may not read the Secret and says what to
	// create.
	sample := documents(t, filepath.Join(configDir, "samples", "proxy_cloudinit.yaml"))
	var binding *unstructured.Unstructured
	for _, obj := range sample {
		if obj.GetKind() == "RoleBinding" {
			binding = obj
			continue
		}
		apply(t, admin, obj)
	}
	if binding == nil {
		t.Fatal("config/samples/proxy_cloudinit.yaml has no RoleBinding for its Secret")
	}
	egress := &v1alpha1.Proxy{}
	egress.Name, egress.Namespace = "egress-squid", "default"
	want := fmt.Sprintf("kubectl -n default create rolebinding %s --clusterrole=%s --serviceaccount=%s:%scontroller-manager",
		userdata.ReaderRole, userdata.ReaderRole, in.Namespace, in.NamePrefix)
	eventually(t, "CloudInitForbidden naming the RoleBinding", func() bool {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(egress), egress); err != nil {
			return false
		}
		c := meta.FindStatusCondition(egress.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonCloudInitForbidden && strings.Contains(c.Message, want)
	})
	if egress.Status.Instance != nil {
		t.Errorf("an instance %+v was begun without the cloud-init", egress.Status.Instance)
	}
	eventually(t, "the CloudInitForbidden event", func() bool {
		var list eventsv1.EventList
		if err := admin.List(ctx, &list, client.InNamespace("default")); err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(list.Items, func(e eventsv1.Event) bool {
			return e.Regarding.Name == egress.Name && e.Reason == v1alpha1.ReasonCloudInitForbidden
		})
	})

	// The admin binds the reader as the sample does: the Proxy goes on.
	apply(t, admin, binding)
	eventually(t, "the instance is created", func() bool {
		return admin.Get(ctx, client.ObjectKeyFromObject(egress), egress) == nil &&
			egress.Status.Instance != nil && egress.Status.Instance.ProviderID != ""
	})
	if err := (memprovider.Control{Cloud: cloud}).ReportIP(ctx, egress.Status.Instance.ProviderID, "192.0.2.10"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Proxy is Ready with its Service", func() bool {
		var svc corev1.Service
		return admin.Get(ctx, client.ObjectKeyFromObject(egress), egress) == nil && egress.Status.Phase == v1alpha1.PhaseReady &&
			admin.Get(ctx, client.ObjectKeyFromObject(egress), &svc) == nil && svc.Labels[v1alpha1.LabelProxy] == egress.Name
	})

	_ = admin.Delete(ctx, egress)
	eventually(t, "the Proxy is deleted", func() bool {
		return admin.Get(ctx, client.ObjectKeyFromObject(egress), egress) != nil
	})
}

// The generated ClusterRole grants nothing on Secrets; the shipped reader
// grants get on Secrets and nothing else, under the name the operator
// tells admins to bind.
func TestShippedRolesReadSecretsOnlyWhereBound(t *testing.T) {
	var in install
	readYAML(t, filepath.Join(configDir, "default", "kustomization.yaml"), &in)
	var manager rbacv1.ClusterRole
	readYAML(t, filepath.Join(configDir, "rbac", "role.yaml"), &manager)
	for _, rule := range manager.Rules {
		if slices.Contains(rule.Resources, "secrets") || slices.Contains(rule.Resources, "*") {
			t.Errorf("the operator's ClusterRole %s grants %v on %v cluster-wide", manager.Name, rule.Verbs, rule.Resources)
		}
	}
	var reader rbacv1.ClusterRole
	readYAML(t, filepath.Join(configDir, "rbac", "cloudinit_reader_role.yaml"), &reader)
	if name := in.NamePrefix + reader.Name; name != userdata.ReaderRole {
		t.Errorf("the reader is installed as %s; the operator tells admins to bind %s", name, userdata.ReaderRole)
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}
	if !slices.EqualFunc(reader.Rules, want, func(a, b rbacv1.PolicyRule) bool {
		return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) && slices.Equal(a.Verbs, b.Verbs) && len(a.ResourceNames) == 0
	}) {
		t.Errorf("the reader's rules %+v, want only %+v", reader.Rules, want)
	}
}

// transform names and places obj as kustomize does with config/default's
// namespace and namePrefix: the name, a namespaced object's namespace,
// a binding's roleRef, and its ServiceAccount subjects.
func (in install) transform(obj *unstructured.Unstructured) *unstructured.Unstructured {
	obj.SetName(in.NamePrefix + obj.GetName())
	if obj.GetNamespace() != "" {
		obj.SetNamespace(in.Namespace)
	}
	if ref, ok := obj.Object["roleRef"].(map[string]any); ok {
		ref["name"] = in.NamePrefix + ref["name"].(string)
	}
	if subjects, ok := obj.Object["subjects"].([]any); ok {
		for _, s := range subjects {
			if s := s.(map[string]any); s["kind"] == "ServiceAccount" {
				s["name"] = in.NamePrefix + s["name"].(string)
				s["namespace"] = in.Namespace
			}
		}
	}
	return obj
}

// documents reads every YAML document of a manifest file.
func documents(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(string(raw), "\n---") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
	return out
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func apply(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %s %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
}

// standInProxy answers like a proxy (an HTTP status line) on loopback and
// returns its address.
func standInProxy(t *testing.T) string {
	t.Helper()
	l, err := probetest.StandIn(func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l.Addr().String()
}

// eventually polls cond for up to 30 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
