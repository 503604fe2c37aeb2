package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace/noop"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest/memprovider"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/config"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller/gc"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controllertest"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/endpoints"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/identity"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/probe"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// The tests of what an install owns run whole operators the way app.Run
// assembles one (providers config parsed, install ID resolved from the
// cluster, entries built, reconciler in a manager), each on a control plane
// of its own (a second envtest: another cluster, with its own kube-system
// UID), over one shared memory Cloud: the backend two clusters, or two
// entries, share.

// sharedToken authenticates every install to a shared Cloud.
const sharedToken = "shared-backend-token"

// newSharedCloud returns a backend for several installs: one region,
// deletes that finish at once.
func newSharedCloud() (*memprovider.Cloud, memprovider.Control) {
	c := memprovider.NewCloud(sharedToken, []string{"r1"}, []string{"debian-12-proxy"}, 0)
	return c, memprovider.Control{Cloud: c}
}

// memoryBlock is the `memory:` block of a test providers config; the
// entries it builds all talk to one Cloud.
type memoryBlock struct {
	Regions []string `json:"regions"`
}

func sharedRegistry(cloud *memprovider.Cloud) providers.Registry {
	cfg := func(b memoryBlock) memprovider.Config {
		return memprovider.Config{Token: sharedToken, Regions: b.Regions,
			MachineTypes: map[string]memprovider.MachineType{"small": {CPUs: 1, MemoryMiB: 512}},
			Images:       map[string]string{"debian-12": "debian-12-proxy"}, CallTimeout: 2 * time.Second}
	}
	reg := providers.Registry{}
	reg.Register(providers.Typed(memprovider.Type,
		func(b memoryBlock) error { return cfg(b).Validate() },
		func(b memoryBlock) (contract.Provider, error) { return memprovider.New(cfg(b), cloud) }))
	return reg
}

// cluster is a control plane of its own.
type cluster struct {
	cfg    *rest.Config
	client client.Client
	scheme *runtime.Scheme
}

// startCluster starts a kube-apiserver and etcd for the test, stopped at
// its end, with the CRDs installed and kube-system created.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	env := controllertest.Environment()
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting a control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping a control plane: %v", err)
		}
	})
	scheme := controllertest.Scheme()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// The API server makes kube-system soon after it starts.
	eventually(t, "kube-system exists", func() bool {
		return c.Get(context.Background(), client.ObjectKey{Name: identity.ClusterNamespace}, &corev1.Namespace{}) == nil
	})
	return &cluster{cfg: cfg, client: c, scheme: scheme}
}

// install is one running operator on a cluster.
type install struct {
	id      string
	set     *providers.Set
	cluster *cluster
	stop    func()
}

// startInstall runs an operator on c with the providers config doc, whose
// entries all talk to cloud; wrap, when set, replaces each entry's provider
// (with one that breaks the contract). The operator stops at the test's
// end, or when stop is called.
func startInstall(t *testing.T, c *cluster, cloud *memprovider.Cloud, doc string, wrap func(*providers.Entry) contract.Provider) *install {
	t.Helper()
	return startInstallOf(t, c, sharedRegistry(cloud), doc, wrap)
}

// startInstallOf runs an operator on c with the providers config doc and
// the provider types of reg.
func startInstallOf(t *testing.T, c *cluster, reg providers.Registry, doc string, wrap func(*providers.Entry) contract.Provider) *install {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg, err := config.Parse([]byte(doc), reg)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := controllertest.NewManager(c.cfg, ctrl.Options{Scheme: c.scheme, Cache: endpoints.CacheOptions(),
		// Each install runs a controller named "proxy" in this one process.
		Controller: crconfig.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.InstallID, err = identity.Resolve(ctx, mgr.GetAPIReader(), cfg.InstallID); err != nil {
		t.Fatal(err)
	}
	set, err := config.Build(cfg, reg, noop.NewTracerProvider())
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		for _, e := range set.All() {
			e.Provider = wrap(e)
		}
	}
	if err := (&Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: c.scheme, Recorder: mgr.GetEventRecorder("egress-proxies-operator"),
		Providers: set, DefaultAllowedClients: []string{"10.0.0.0/8"},
		Prober: probe.HTTPProxy{Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, standIn.Addr().String())
		}, Timeout: time.Second},
		Timing: Timing{Poll: 100 * time.Millisecond, Resync: 300 * time.Millisecond, QuotaBackoff: time.Second, PermanentRetry: 2 * time.Second},
	}).SetupWithManager(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	stopManager := controllertest.Start(mgr, func(err error) { t.Errorf("install %s: manager: %v", cfg.InstallID, err) })
	stop := func() { stopManager(); cancel() }
	t.Cleanup(stop)
	return &install{id: cfg.InstallID, set: set, cluster: c, stop: stop}
}

// entry returns the install's entry called name.
func (in *install) entry(t *testing.T, name string) *providers.Entry {
	t.Helper()
	e, ok := in.set.Get(name)
	if !ok {
		t.Fatalf("install %s has no entry %s", in.id, name)
	}
	return e
}

// sweepLater runs the install's garbage collector over entry name as if
// every instance were older than gc.minAge, and returns what it deleted.
func (in *install) sweepLater(t *testing.T, name string) []contract.Instance {
	t.Helper()
	e := in.entry(t, name)
	collector := &gc.Collector{Reader: in.cluster.client, Providers: in.set,
		Now: func() time.Time { return time.Now().Add(e.GC.MinAge + time.Hour) }}
	deleted, err := collector.Sweep(context.Background(), e)
	if err != nil {
		t.Fatalf("install %s: sweep of %s: %v", in.id, name, err)
	}
	return deleted
}

// proxyOn creates a Proxy on c on entry provider, in the shared Cloud's
// region; the test's end deletes it, if the test did not.
func proxyOn(t *testing.T, c *cluster, name, provider string) *v1alpha1.Proxy {
	t.Helper()
	return proxyAt(t, c, name, provider, v1alpha1.Placement{Region: "r1", MachineType: "small", Image: "debian-12"})
}

// proxyAt creates a Proxy on c on entry provider at placement.
func proxyAt(t *testing.T, c *cluster, name, provider string, placement v1alpha1.Placement) *v1alpha1.Proxy {
	t.Helper()
	p := &v1alpha1.Proxy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
		Spec:       v1alpha1.ProxySpec{Provider: provider, Placement: placement, Port: 3128},
	}
	if err := c.client.Create(context.Background(), p); err != nil {
		t.Fatalf("create Proxy %s: %v", name, err)
	}
	t.Cleanup(func() { _ = c.client.Delete(context.Background(), p) })
	return p
}

// getOn returns the Proxy's current state on c, nil once it is gone.
func getOn(t *testing.T, c *cluster, p *v1alpha1.Proxy) *v1alpha1.Proxy {
	t.Helper()
	var out v1alpha1.Proxy
	err := c.client.Get(context.Background(), client.ObjectKeyFromObject(p), &out)
	if client.IgnoreNotFound(err) != nil {
		t.Fatalf("get Proxy %s: %v", p.Name, err)
	}
	if err != nil {
		return nil
	}
	return &out
}

// bootOn waits for the instance ref picks to be created and plays its
// guest reporting an address; it returns the providerID.
func bootOn(t *testing.T, c *cluster, ctl memprovider.Control, p *v1alpha1.Proxy, ref func(*v1alpha1.ProxyStatus) *v1alpha1.InstanceRef) string {
	t.Helper()
	var id string
	eventually(t, "the instance of "+p.Name+" is created", func() bool {
		if got := getOn(t, c, p); got != nil {
			if r := ref(&got.Status); r != nil && r.ProviderID != "" {
				id = r.ProviderID
				return true
			}
		}
		return false
	})
	if err := ctl.ReportIP(context.Background(), id, fmt.Sprintf("192.0.2.%d", guestIPs.Add(1))); err != nil {
		t.Fatalf("report IP: %v", err)
	}
	return id
}

// readyOn waits until the Proxy is Ready on c.
func readyOn(t *testing.T, c *cluster, p *v1alpha1.Proxy) *v1alpha1.Proxy {
	t.Helper()
	return readyOnWithin(t, c, p, 20*time.Second)
}

// readyOnWithin is readyOn for up to d.
func readyOnWithin(t *testing.T, c *cluster, p *v1alpha1.Proxy, d time.Duration) *v1alpha1.Proxy {
	t.Helper()
	var got *v1alpha1.Proxy
	controllertest.EventuallyWithin(t, d, p.Name+" is Ready", func() bool {
		got = getOn(t, c, p)
		return got != nil && got.Status.Phase == v1alpha1.PhaseReady
	})
	return got
}

// eventsOn returns the notes of every event regarding the Proxy on c.
func eventsOn(t *testing.T, c *cluster, p *v1alpha1.Proxy) []string {
	t.Helper()
	return eventsIn(t, c.client, p)
}

// vmOf reads an instance back from the shared backend, as any entry sees
// it: Get needs no owner.
func vmOf(t *testing.T, e *providers.Entry, providerID string) (contract.Instance, bool) {
	t.Helper()
	inst, err := e.Provider.Get(context.Background(), providerID)
	switch {
	case err == nil && inst.State != contract.StateTerminated:
		return inst, true
	case err == nil, errors.Is(err, contract.ErrNotFound):
		return inst, false
	}
	t.Fatalf("Get %s: %v", providerID, err)
	return inst, false
}

// markedVM makes a running VM on the shared backend directly, with the
// marks a test gives: one v0.1 made (managed=true), or one another install
// made.
func markedVM(t *testing.T, cloud *memprovider.Cloud, ctl memprovider.Control, name, managed, uid string) string {
	t.Helper()
	ctx := context.Background()
	_, err := cloud.CreateVM(ctx, sharedToken, "r1", memprovider.VMSpec{Name: name, Image: "debian-12-proxy", CPUs: 1, MemoryMiB: 512,
		Labels: map[string]string{contract.LabelManaged: managed, contract.LabelUID: uid}})
	if err != nil {
		t.Fatalf("create VM %s: %v", name, err)
	}
	if err := cloud.StartVM(ctx, sharedToken, "r1", name); err != nil {
		t.Fatal(err)
	}
	id := "r1/" + name
	if err := ctl.ReportIP(ctx, id, fmt.Sprintf("192.0.2.%d", guestIPs.Add(1))); err != nil {
		t.Fatal(err)
	}
	return id
}

// providerIDs lists the providerIDs of insts.
func providerIDs(insts []contract.Instance) []string {
	out := make([]string, len(insts))
	for i, inst := range insts {
		out[i] = inst.ProviderID
	}
	return out
}
