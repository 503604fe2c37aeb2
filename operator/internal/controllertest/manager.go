package controllertest

import (
	"context"
	"sync"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// NewManager is a manager on cfg with opts, the operator's scheme when opts
// names none, and no metrics listener: several suites, and several
// managers within one, run at once.
func NewManager(cfg *rest.Config, opts ctrl.Options) (manager.Manager, error) {
	if opts.Scheme == nil {
		opts.Scheme = Scheme()
	}
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	return ctrl.NewManager(cfg, opts)
}

// Start runs mgr in the background; a failure to start goes to report.
// The function it returns stops mgr and waits until it has stopped; it may
// be called more than once (a test's explicit stop and its Cleanup).
func Start(mgr manager.Manager, report func(error)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			report(err)
		}
	}()
	return sync.OnceFunc(func() {
		cancel()
		<-done
	})
}
