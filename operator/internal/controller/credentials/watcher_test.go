package credentials

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controllertest"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/secretvolume"
)

// The Watcher's unit tests run it on a temporary directory over a small
// fake client (controller-runtime's): what it reads of the API is one
// List of Proxies; the reconciles it starts are the Proxy suite's
// (controller/proxy, credentials_test.go).

var logs = controllertest.CaptureLogs()

type checks struct{ n atomic.Int32 }

func (c *checks) CheckAll(context.Context) { c.n.Add(1) }

func proxyWith(name string, ready, deleting bool) *v1alpha1.Proxy {
	p := &v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps"}}
	if ready {
		p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Serving", LastTransitionTime: metav1.Now()}}
	}
	if deleting {
		p.Finalizers = []string{v1alpha1.Finalizer}
		p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	}
	return p
}

// watch starts w on a new directory with the Secret mounted, and returns
// the directory and the events w sends; w stops when the test ends.
func watch(t *testing.T, w *Watcher) (string, <-chan event.GenericEvent) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "credentials")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := secretvolume.Write(dir, map[string]string{"token": "a"}); err != nil {
		t.Fatal(err)
	}
	events := make(chan event.GenericEvent, 10)
	w.Dir, w.Requeue = dir, events
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	// The state at start is the baseline: a change made before it is read
	// is no change.
	controllertest.Eventually(t, "the watcher has read its baseline", func() bool { return logs.Count("watching the credential files", dir) == 1 })
	return dir, events
}

// names reads the events until quiet has passed without one.
func names(events <-chan event.GenericEvent, quiet time.Duration) []string {
	var got []string
	for {
		select {
		case e := <-events:
			got = append(got, e.Object.GetName())
		case <-time.After(quiet):
			return got
		}
	}
}

func TestAChangeRequeuesTheProxiesNotReadyAndChecksTheProviders(t *testing.T) {
	k8s := fake.NewClientBuilder().WithScheme(controllertest.Scheme()).WithObjects(
		proxyWith("a-ready", true, false), proxyWith("b-waiting", false, false),
		proxyWith("c-ready-deleting", true, true), proxyWith("d-ready", true, false),
	).Build()
	var resets atomic.Int32
	health := &checks{}
	w := &Watcher{Poll: 10 * time.Millisecond, Client: k8s, Health: health, ResetBackoffs: func() { resets.Add(1) }}
	dir, events := watch(t, w)

	if got := names(events, 200*time.Millisecond); len(got) != 0 || resets.Load() != 0 || health.n.Load() != 0 {
		t.Fatalf("without a change: requeued %v, %d resets, %d checks", got, resets.Load(), health.n.Load())
	}
	if err := secretvolume.Write(dir, map[string]string{"token": "b"}); err != nil {
		t.Fatal(err)
	}
	got := names(events, time.Second)
	if len(got) != 2 || got[0] != "b-waiting" || got[1] != "c-ready-deleting" {
		t.Errorf("requeued %v, want the Proxy that is not Ready and the one being deleted", got)
	}
	if resets.Load() != 1 || health.n.Load() != 1 {
		t.Errorf("%d back-off resets and %d provider checks, want one each", resets.Load(), health.n.Load())
	}
	if logs.Count("credential files changed: reconciling", `"proxies"=2`, dir) != 1 || logs.Count("listing the Proxies failed", dir) != 0 {
		t.Errorf("logs:\n%s", logs)
	}
}

func TestAFailedListStillChecksTheProviders(t *testing.T) {
	k8s := fake.NewClientBuilder().WithScheme(controllertest.Scheme()).WithInterceptorFuncs(interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("the API server is away")
		},
	}).Build()
	health := &checks{}
	// Neither ResetBackoffs nor a Requeue reader is needed: nil is allowed.
	w := &Watcher{Poll: 10 * time.Millisecond, Client: k8s, Health: health}
	dir, events := watch(t, w)
	if err := secretvolume.Write(dir, map[string]string{"token": "b"}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "the providers are checked", func() bool { return health.n.Load() == 1 })
	if got := names(events, 100*time.Millisecond); len(got) != 0 {
		t.Errorf("requeued %v from a failed list", got)
	}
	if logs.Count("listing the Proxies failed", "the API server is away", dir) != 1 {
		t.Errorf("the failed list is not logged:\n%s", logs)
	}
}

// Poll 0 is DefaultPoll: the watcher runs, and sees a change.
func TestZeroPollIsTheDefault(t *testing.T) {
	k8s := fake.NewClientBuilder().WithScheme(controllertest.Scheme()).Build()
	health := &checks{}
	dir, _ := watch(t, &Watcher{Client: k8s, Health: health})
	if err := secretvolume.Write(dir, map[string]string{"token": "b"}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "a change is seen at the default poll", func() bool { return health.n.Load() == 1 })
}
