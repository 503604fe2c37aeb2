// Command egress-proxies-operator runs the operator: the Proxy reconciler,
// the garbage collector and the health checker, over the providers named
// in its providers config and compiled in by build tags
// (go build -tags "vsphere libvirt").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/config"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metrics"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/probe"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// constructors holds the provider types compiled in; each
// providers_<type>.go file registers one behind its build tag.
var constructors = providers.Registry{}

func main() {
	var (
		configPath, metricsAddr, probeAddr string
		leaderElect                        bool
	)
	flag.StringVar(&configPath, "providers-config", "/etc/egress-proxies/providers.yaml", "Path of the providers config file.")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Address the metrics endpoint binds to; 0 disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz endpoints bind to.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader, so only one replica reconciles.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))

	if err := run(configPath, metricsAddr, probeAddr, leaderElect); err != nil {
		ctrl.Log.Error(err, "operator stopped")
		os.Exit(1)
	}
}

func run(configPath, metricsAddr, probeAddr string, leaderElect bool) error {
	cfg, err := config.Load(configPath, constructors)
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	tp, shutdown, err := tracerProvider(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = shutdown(context.WithoutCancel(ctx)) }()
	set, err := config.Build(cfg, constructors, tp)
	if err != nil {
		return err
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "egress-proxies-operator.egressproxies.io",
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	events := mgr.GetEventRecorder("egress-proxies-operator")
	if err := (&controller.ProxyReconciler{
		Client: mgr.GetClient(), SecretReader: mgr.GetAPIReader(), Scheme: scheme, Recorder: events, Providers: set,
		Prober: probe.HTTPProxy{}, DefaultAllowedClients: cfg.DefaultAllowedClients,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("proxy controller: %w", err)
	}
	if err := mgr.Add(&controller.GarbageCollector{Reader: mgr.GetAPIReader(), Providers: set, Recorder: events}); err != nil {
		return err
	}
	if err := mgr.Add(&controller.HealthChecker{Client: mgr.GetClient(), Providers: set}); err != nil {
		return err
	}
	if err := crmetrics.Registry.Register(metrics.NewProxyPhases(mgr.GetClient())); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting", "providers", set.Names(), "compiledIn", constructors.Types())
	return mgr.Start(ctx)
}

// tracerProvider exports spans over OTLP/HTTP when the standard OTEL_*
// variables name an endpoint, and discards them otherwise (tracing is off
// by default).
func tracerProvider(ctx context.Context) (trace.TracerProvider, func(context.Context) error, error) {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, errors.Join(errors.New("OTLP trace exporter"), err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	return tp, tp.Shutdown, nil
}
