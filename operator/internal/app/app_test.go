package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller/proxy"
)

// Negative bounds stop the operator before it reads its config or reaches
// the cluster, each naming the flag and the value.
func TestNegativeBoundsFailStart(t *testing.T) {
	reached := false
	err := Run(context.Background(), Options{
		ConfigPath: "/nonexistent/providers.yaml",
		RestConfig: func() (*rest.Config, error) { reached = true; return nil, nil },
		Bounds:     proxy.Bounds{Workers: -1, Deadline: -time.Second},
		Timing:     proxy.Timing{Drain: -time.Second},
	})
	if err == nil || reached {
		t.Fatalf("Run with negative bounds: %v (cluster reached: %v)", err, reached)
	}
	for _, want := range []string{"--max-concurrent-reconciles -1: must be positive", "--reconcile-timeout -1s: must be positive", "--drain-period -1s: must be positive"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "providers config") {
		t.Errorf("error %q: the config was read before the flags were checked", err)
	}
}
