package gc

import (
	"context"
	"fmt"
	"os"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	logs          *controllertest.Logs
)

func TestMain(m *testing.M) {
	logs = controllertest.CaptureLogs()
	controllertest.Main(m, run)
}

func run(m *testing.M, cfg *rest.Config) int {
	scheme := controllertest.Scheme()
	var err error
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := controllertest.NewManager(cfg, ctrl.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	eventRecorder = mgr.GetEventRecorder("egress-proxies-operator")
	defer controllertest.Start(mgr, func(err error) { fmt.Fprintln(os.Stderr, "manager:", err) })()
	return m.Run()
}

// logLines counts the log lines holding every one of parts.
func logLines(parts ...string) int { return logs.Count(parts...) }

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
