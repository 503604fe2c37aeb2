package health

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest/memprovider"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controllertest"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// The suite runs the Checker against a real kube-apiserver and etcd
// (controllertest), with the reference provider over an in-memory Cloud as
// the entry it checks.

const (
	testProvider = "mem"
	testToken    = "health-credential-1f2e"
)

var (
	k8s     client.Client
	control memprovider.Control
	set     *providers.Set
	logs    = &logBuffer{}
)

func TestMain(m *testing.M) {
	logf.SetLogger(funcr.New(logs.write, funcr.Options{Verbosity: 10}))
	controllertest.Main(m, run)
}

func run(m *testing.M, cfg *rest.Config) int {
	var err error
	if k8s, err = client.New(cfg, client.Options{Scheme: controllertest.Scheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cloud := memprovider.NewCloud(testToken, []string{"r1"}, []string{"debian-12-proxy"}, 10*time.Millisecond)
	control = memprovider.Control{Cloud: cloud}
	prov, err := memprovider.New(memprovider.Config{
		Token: testToken, Regions: []string{"r1"},
		MachineTypes: map[string]memprovider.MachineType{"small": {CPUs: 1, MemoryMiB: 512}},
		Images:       map[string]string{"debian-12": "debian-12-proxy"},
		CallTimeout:  2 * time.Second,
	}, cloud)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	set = providers.NewSet(&providers.Entry{Name: testProvider, Type: memprovider.Type, Owner: "c0ffee12-" + testProvider, Provider: prov, CheckInterval: time.Hour})
	return m.Run()
}

// logBuffer keeps every log line the checker writes.
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
