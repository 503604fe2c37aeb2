package proxy

import (
	"testing"
	"time"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controllertest"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/readiness"
)

// addRecorder is a manager that records the runnables added to it.
type addRecorder struct {
	manager.Manager
	added []manager.Runnable
}

func (m *addRecorder) Add(r manager.Runnable) error {
	m.added = append(m.added, r)
	return m.Manager.Add(r)
}

// SetupWithManager runs the serving watch at Timing.Watch, the default
// when unset, and none when it is negative (--serving-watch-period=-1s).
func TestServingWatchRunsUnlessItsPeriodIsNegative(t *testing.T) {
	for _, c := range []struct {
		watch, want time.Duration
	}{{0, DefaultWatch}, {250 * time.Millisecond, 250 * time.Millisecond}, {-time.Second, 0}} {
		mgr, err := controllertest.NewManager(restConfig, ctrl.Options{Scheme: testScheme,
			Controller: crconfig.Controller{SkipNameValidation: ptr.To(true)}})
		if err != nil {
			t.Fatal(err)
		}
		m := &addRecorder{Manager: mgr}
		r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: testScheme, Recorder: mgr.GetEventRecorder("test"),
			Providers: set, Timing: Timing{Watch: c.watch}}
		if err := r.SetupWithManager(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		var got time.Duration
		for _, a := range m.added {
			if w, ok := a.(*readiness.Watch); ok {
				got = w.Period
			}
		}
		if got != c.want {
			t.Errorf("Timing.Watch %s: the serving watch runs every %s (0: none), want %s", c.watch, got, c.want)
		}
	}
}
