package gc

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controllertest"
)

// testNamespace holds the Proxies the events regard.
const testNamespace = "default"

// The suite runs the Collector against a real kube-apiserver and etcd
// (controllertest), over stub providers whose listings a test sets; a
// manager without controllers records the events.

var (
	k8s           client.Client
	eventRecorder recorder.EventRecorder
	logs          = &logBuffer{}
)

func TestMain(m *testing.M) {
	logf.SetLogger(funcr.New(logs.write, funcr.Options{Verbosity: 10}))
	controllertest.Main(m, run)
}

func run(m *testing.M, cfg *rest.Config) int {
	scheme := controllertest.Scheme()
	var err error
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	eventRecorder = mgr.GetEventRecorder("egress-proxies-operator")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return m.Run()
}

// logBuffer keeps every log line the collector writes.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) write(prefix, args string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, prefix+" "+args)
}

// logLines counts the log lines holding every one of parts.
func logLines(parts ...string) int {
	logs.mu.Lock()
	defer logs.mu.Unlock()
	n := 0
	for _, line := range logs.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// eventsFor returns the reason and note of every event regarding the
// Proxy.
func eventsFor(t *testing.T, p *v1alpha1.Proxy) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(p.Namespace)); err != nil {
		t.Fatalf("list events: %v", err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == p.Name && e.Regarding.Kind == "Proxy" {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}
