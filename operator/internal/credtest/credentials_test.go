package credtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest/memprovider"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/app"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller/proxy"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/probe"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/secretvolume"
)

// The operator as main runs it (app.Run, with its providers config file
// and --credentials-dir) against a real kube-apiserver and etcd, with the
// reference provider reading its token from the mounted credentials
// directory. There is no kubelet: the test writes the directory the way
// the kubelet does. The reconciler keeps its default waits: 30 min after a
// permanent error.

const cloudToken = "sentinel-token-9d2b47"

// pickedUpWithin bounds the time from a credential file's change to the
// Proxy being Ready: the "within a minute".
const pickedUpWithin = time.Minute

// servedWithin bounds the time from a late Secret's files to the Proxy's
// Create: the watcher's 2 s poll and a reconcile, with room for a loaded
// machine (docs/operator.md says 0.4–2 s). A lane that has failed nine
// times in a row waits 25.6 s before its next call; the watcher's change
// resets that back-off (a regression: the Proxy went Ready 22 s after the
// Secret appeared).
const servedWithin = 12 * time.Second

// backedOffFailures is how many failed Creates in a row the late Proxy's
// lane has behind it when its Secret appears: its next call would wait
// 100 ms × 2⁸ = 25.6 s without the reset.
const backedOffFailures = 9

func TestCredentialFilesArePickedUpWithoutRestart(t *testing.T) {
	op := startOperator(t)
	t.Run("a Secret created after the Proxy", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(op.credentials, "late-token")
		p := op.newProxy(t, "late-secret", "late")

		waited := op.waitProxy(t, p, "not Ready for the missing credential", func(p *v1alpha1.Proxy) bool {
			return p.Status.LastError != nil
		})
		cond := meta.FindStatusCondition(waited.Status.Conditions, v1alpha1.ConditionReady)
		if cond == nil || cond.Reason != v1alpha1.ReasonCredentialsUnavailable || !strings.Contains(cond.Message, path) {
			t.Errorf("Ready condition %+v, want reason %s naming %s", cond, v1alpha1.ReasonCredentialsUnavailable, path)
		}
		if c := waited.Status.LastError.Class; c != string(contract.ClassTransient) {
			t.Errorf("lastError class %s, want Transient: the Secret may come", c)
		}
		if !op.health("late", 20*time.Second, func(c v1alpha1.ProviderCheck) bool {
			return !c.OK && c.Reason == contract.ReasonUnauthenticated && strings.Contains(c.Message, path)
		}) {
			t.Errorf("ProviderHealth late: the credentials check does not fail as Unauthenticated naming %s", path)
		}

		// The Secret appears once the lane has backed off far: kept from
		// its provider's next call by more than servedWithin.
		waitUntil(t, time.Minute, fmt.Sprintf("%d Creates of %s have failed", backedOffFailures, p.Name), func() bool {
			return op.createFailures(path) >= backedOffFailures
		})
		written := op.secret.set(t, "late-token", cloudToken+"\n")
		waitUntil(t, servedWithin, "the instance of "+p.Name+" is created after its Secret appeared", func() bool {
			var got v1alpha1.Proxy
			return op.k8s.Get(context.Background(), client.ObjectKeyFromObject(p), &got) == nil && got.Status.Instance != nil && got.Status.Instance.ProviderID != ""
		})
		t.Logf("created %s after the Secret was written", time.Since(written).Round(100*time.Millisecond))
		op.bootAndWaitReady(t, p, written)
		t.Logf("Ready %s after the Secret was written", time.Since(written).Round(100*time.Millisecond))
		if !op.health("late", time.Until(written.Add(pickedUpWithin)), func(c v1alpha1.ProviderCheck) bool { return c.OK }) {
			t.Errorf("ProviderHealth late: the credentials check still fails %s after the Secret was written", pickedUpWithin)
		}
	})
	t.Run("a refused credential rotated", func(t *testing.T) {
		t.Parallel()
		op.secret.set(t, "fixed-token", "an-old-password\n")
		p := op.newProxy(t, "fixed-secret", "fixed")

		waited := op.waitProxy(t, p, "Failed on the refused credential", func(p *v1alpha1.Proxy) bool {
			return p.Status.LastError != nil
		})
		if waited.Status.Phase != v1alpha1.PhaseFailed || waited.Status.LastError.Class != string(contract.ClassPermanent) {
			t.Errorf("phase %s, lastError %+v: want Failed on a permanent error (the backend's 401)", waited.Status.Phase, waited.Status.LastError)
		}
		if !op.health("fixed", 20*time.Second, func(c v1alpha1.ProviderCheck) bool {
			return !c.OK && c.Reason == contract.ReasonUnauthenticated
		}) {
			t.Errorf("ProviderHealth fixed: the credentials check does not fail as Unauthenticated")
		}

		written := op.secret.set(t, "fixed-token", cloudToken+"\n")
		op.bootAndWaitReady(t, p, written)
		t.Logf("Ready %s after the rotated Secret was written", time.Since(written).Round(100*time.Millisecond))
		if !op.health("fixed", time.Until(written.Add(pickedUpWithin)), func(c v1alpha1.ProviderCheck) bool { return c.OK }) {
			t.Errorf("ProviderHealth fixed: the credentials check still fails %s after the rotated Secret was written", pickedUpWithin)
		}
	})
}

// operator is one running operator and what the tests reach it by.
type operator struct {
	k8s         client.Client
	cloud       *memprovider.Cloud
	credentials string
	secret      *mountedSecret
	guestIPs    sync.Mutex
	nextIP      int
	// failures counts each token file's failed Creates.
	failures sync.Map // path → *atomic.Int64
}

// createFailures is how many Creates through the token file at path failed.
func (op *operator) createFailures(path string) int64 {
	n, _ := op.failures.LoadOrStore(path, new(atomic.Int64))
	return n.(*atomic.Int64).Load()
}

// startOperator starts a control plane and runs the operator on it until
// the test ends. Once per process: Run registers global metrics and the
// controller's name.
func startOperator(t *testing.T) *operator {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run through `make test/operator`, or export KUBEBUILDER_ASSETS=$(hack/control-plane.sh)")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	// The operator's log, shown when a test fails.
	var logMu sync.Mutex
	var logLines []string
	logf.SetLogger(funcr.New(func(prefix, args string) {
		logMu.Lock()
		defer logMu.Unlock()
		logLines = append(logLines, prefix+" "+args)
	}, funcr.Options{Verbosity: 1}))
	t.Cleanup(func() {
		if t.Failed() {
			logMu.Lock()
			defer logMu.Unlock()
			t.Logf("operator log:\n%s", strings.Join(logLines, "\n"))
		}
	})
	k8s, err := client.New(cfg, client.Options{Scheme: app.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}

	// The credentials volume exists, empty: the kubelet mounts an optional
	// Secret that does not exist yet as an empty directory.
	dir := t.TempDir()
	op := &operator{k8s: k8s, credentials: dir, secret: &mountedSecret{dir: dir, data: map[string]string{}},
		cloud: memprovider.NewCloud(cloudToken, []string{"r1"}, []string{"debian-12-proxy"}, 0)}
	configPath := filepath.Join(t.TempDir(), "providers.yaml")
	config := fmt.Sprintf(`defaultAllowedClients: ["10.0.0.0/8"]
providers:
  - {name: late, type: memory, memory: {tokenFile: %[1]s/late-token}, checkInterval: 1h}
  - {name: fixed, type: memory, memory: {tokenFile: %[1]s/fixed-token}, checkInterval: 1h}
`, dir)
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}

	// Every VM's address leads to a local HTTP server, which answers the
	// probe as a proxy would: over loopback only.
	standIn := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(standIn.Close)
	prober := probe.HTTPProxy{Timeout: time.Second, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, standIn.Listener.Addr().String())
	}}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, app.Options{
			ConfigPath: configPath, Registry: op.registry(),
			RestConfig:  func() (*rest.Config, error) { return cfg, nil },
			MetricsAddr: "0", ProbeAddr: "0",
			Prober: prober,
			// Polls shorter than the default 5 s keep the test short; the
			// wait after a permanent error keeps its default, 30 min.
			Timing:         proxy.Timing{Poll: 200 * time.Millisecond},
			CredentialsDir: dir,
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("operator: %v", err)
		}
	})
	return op
}

// registry compiles in the memory type with its token read from a file.
func (op *operator) registry() providers.Registry {
	reg := providers.Registry{}
	reg.Register(providers.Typed(memprovider.Type,
		func(b tokenFileBlock) error { return b.config("-").Validate() },
		func(b tokenFileBlock) (contract.Provider, error) {
			failures, _ := op.failures.LoadOrStore(b.TokenFile, new(atomic.Int64))
			return &tokenFileProvider{file: &contract.SecretFile{Path: b.TokenFile}, cfg: b.config("-"), cloud: op.cloud,
				createFailures: failures.(*atomic.Int64)}, nil
		}))
	return reg
}

// tokenFileBlock is the test's `memory:` block: the path of the token.
type tokenFileBlock struct {
	TokenFile string `json:"tokenFile"`
}

func (b tokenFileBlock) config(token string) memprovider.Config {
	return memprovider.Config{
		Token: token, Regions: []string{"r1"},
		MachineTypes: map[string]memprovider.MachineType{"small": {CPUs: 1, MemoryMiB: 512}},
		Images:       map[string]string{"debian-12": "debian-12-proxy"},
		CallTimeout:  2 * time.Second,
	}
}

// tokenFileProvider is the reference provider with credentials:
// mounted-files, the way the real providers read theirs: the token comes
// from a contract.SecretFile on each call, and its error is returned as
// it is. memprovider takes its token in its config; its New makes no call,
// so a provider per call costs nothing.
type tokenFileProvider struct {
	file           *contract.SecretFile
	cfg            memprovider.Config
	cloud          *memprovider.Cloud
	createFailures *atomic.Int64
}

var _ contract.Checker = (*tokenFileProvider)(nil)

func (p *tokenFileProvider) provider() (*memprovider.Provider, error) {
	token, err := p.file.Read()
	if err != nil {
		return nil, err
	}
	cfg := p.cfg
	cfg.Token = token
	return memprovider.New(cfg, p.cloud)
}

func (p *tokenFileProvider) Create(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
	m, err := p.provider()
	if err != nil {
		p.createFailures.Add(1)
		return contract.Instance{}, err
	}
	return m.Create(ctx, req)
}

func (p *tokenFileProvider) Get(ctx context.Context, providerID string) (contract.Instance, error) {
	m, err := p.provider()
	if err != nil {
		return contract.Instance{}, err
	}
	return m.Get(ctx, providerID)
}

func (p *tokenFileProvider) Delete(ctx context.Context, providerID string) error {
	m, err := p.provider()
	if err != nil {
		return err
	}
	return m.Delete(ctx, providerID)
}

func (p *tokenFileProvider) ListByTag(ctx context.Context, key, value string) ([]contract.Instance, error) {
	m, err := p.provider()
	if err != nil {
		return nil, err
	}
	return m.ListByTag(ctx, key, value)
}

// Check reports an unusable token file as its credentials target, as a
// real provider's first check does.
func (p *tokenFileProvider) Check(ctx context.Context) []contract.CheckResult {
	m, err := p.provider()
	if err != nil {
		return []contract.CheckResult{contract.ResultFromError("credentials", err)}
	}
	return m.Check(ctx)
}

// mountedSecret is the credentials Secret as the kubelet keeps it mounted.
type mountedSecret struct {
	mu   sync.Mutex
	dir  string
	data map[string]string
}

// set writes key into the Secret and returns when it was written.
func (s *mountedSecret) set(t *testing.T, key, value string) time.Time {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data[key] = value
	if err := secretvolume.Write(s.dir, s.data); err != nil {
		t.Fatalf("writing the credentials volume: %v", err)
	}
	return time.Now()
}

// newProxy creates a Proxy on provider and deletes it when the test ends.
func (op *operator) newProxy(t *testing.T, name, provider string) *v1alpha1.Proxy {
	t.Helper()
	p := &v1alpha1.Proxy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1alpha1.ProxySpec{
			Provider:  provider,
			Placement: v1alpha1.Placement{Region: "r1", MachineType: "small", Image: "debian-12"},
			Port:      3128,
		},
	}
	if err := op.k8s.Create(context.Background(), p); err != nil {
		t.Fatalf("create Proxy %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = op.k8s.Delete(context.Background(), p)
		waitUntil(t, time.Minute, "Proxy "+name+" is gone", func() bool {
			err := op.k8s.Get(context.Background(), client.ObjectKeyFromObject(p), &v1alpha1.Proxy{})
			return err != nil && client.IgnoreNotFound(err) == nil
		})
	})
	return p
}

// waitProxy waits up to 20 s until the Proxy satisfies cond, and returns it.
func (op *operator) waitProxy(t *testing.T, p *v1alpha1.Proxy, what string, cond func(*v1alpha1.Proxy) bool) *v1alpha1.Proxy {
	t.Helper()
	var got v1alpha1.Proxy
	ok := poll(20*time.Second, func() bool {
		return op.k8s.Get(context.Background(), client.ObjectKeyFromObject(p), &got) == nil && cond(&got)
	})
	status, _ := json.Marshal(got.Status)
	if !ok {
		t.Fatalf("timed out waiting until %s is %s; its status: %s", p.Name, what, status)
	}
	if strings.Contains(string(status), cloudToken) || strings.Contains(string(status), "an-old-password") {
		t.Errorf("the status holds the credential: %s", status)
	}
	return &got
}

// bootAndWaitReady waits, up to pickedUpWithin after since, for the
// Proxy's instance to exist, plays its guest reporting an address, and
// waits for the Proxy to be Ready.
func (op *operator) bootAndWaitReady(t *testing.T, p *v1alpha1.Proxy, since time.Time) {
	t.Helper()
	var id string
	waitUntil(t, time.Until(since.Add(pickedUpWithin)), "the instance of "+p.Name+" is created", func() bool {
		var got v1alpha1.Proxy
		if op.k8s.Get(context.Background(), client.ObjectKeyFromObject(p), &got) == nil && got.Status.Instance != nil {
			id = got.Status.Instance.ProviderID
		}
		return id != ""
	})
	op.guestIPs.Lock()
	op.nextIP++
	ip := fmt.Sprintf("192.0.2.%d", op.nextIP)
	op.guestIPs.Unlock()
	if err := (memprovider.Control{Cloud: op.cloud}).ReportIP(context.Background(), id, ip); err != nil {
		t.Fatalf("report IP: %v", err)
	}
	waitUntil(t, time.Until(since.Add(pickedUpWithin)), p.Name+" is Ready", func() bool {
		var got v1alpha1.Proxy
		return op.k8s.Get(context.Background(), client.ObjectKeyFromObject(p), &got) == nil && got.Status.Phase == v1alpha1.PhaseReady
	})
}

// health reports whether the provider's "credentials" check satisfies
// cond within bound.
func (op *operator) health(provider string, bound time.Duration, cond func(v1alpha1.ProviderCheck) bool) bool {
	return poll(bound, func() bool {
		var ph v1alpha1.ProviderHealth
		if op.k8s.Get(context.Background(), client.ObjectKey{Name: provider}, &ph) != nil {
			return false
		}
		for _, c := range ph.Status.Checks {
			if c.Target == "credentials" {
				return cond(c)
			}
		}
		return false
	})
}

// waitUntil fails the test unless cond holds within bound.
func waitUntil(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(bound, cond) {
		t.Fatalf("timed out after %s waiting until %s", bound.Round(time.Second), what)
	}
}

// poll checks cond every 100 ms until it holds (true) or bound has passed
// (false).
func poll(bound time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}
