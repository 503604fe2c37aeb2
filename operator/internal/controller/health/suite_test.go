package health

import (
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	logs    *controllertest.Logs
)

func TestMain(m *testing.M) {
	logs = controllertest.CaptureLogs()
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

// logLines counts the log lines holding every one of parts.
func logLines(parts ...string) int { return logs.Count(parts...) }
