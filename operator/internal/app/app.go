// Package app assembles the operator from its parts — providers config,
// providers, manager, reconciler, garbage collector, health checker,
// metrics and tracing — for cmd/main.go and for the local dev run.
package app

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/binding"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/config"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller/addresspool"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller/credentials"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller/gc"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller/health"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller/proxy"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/endpoints"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/identity"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metrics"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/probe"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// Options configure one operator.
type Options struct {
	// ConfigPath is the providers config file.
	ConfigPath string
	// Registry holds the provider types compiled in.
	Registry providers.Registry
	// RestConfig returns how to reach the cluster; called after the
	// providers config was read, so an invalid config fails first.
	RestConfig func() (*rest.Config, error)
	// MetricsAddr and ProbeAddr are where the metrics and health endpoints
	// bind ("0" disables).
	MetricsAddr, ProbeAddr string
	// SecureMetrics serves metrics over HTTPS to authenticated and
	// authorised clients only (metrics.go); MetricsCertDir holds its
	// tls.crt and tls.key, else the certificate is self-signed.
	SecureMetrics  bool
	MetricsCertDir string
	// LeaderElect elects one active replica.
	LeaderElect bool
	// LeaderElectionNamespace holds the Lease; empty is the operator's own
	// namespace when it runs in a Pod.
	LeaderElectionNamespace string
	// Prober checks proxies; nil is the real HTTP probe.
	Prober probe.Prober
	// Timing overrides the reconciler's waits; zero values are the defaults.
	Timing proxy.Timing
	// CredentialsDir is where the credentials Secret is mounted; a change
	// of its files reconciles the Proxies that are not Ready and re-runs
	// the providers' checks at once. Empty: not watched.
	CredentialsDir string
	// Webhook configures the Pod webhook that binds workloads to a Proxy;
	// Port 0 leaves it off (a local run, a cluster without bindings).
	Webhook binding.Options
	// Bounds set how many Proxies reconcile at once
	// (--max-concurrent-reconciles) and how long one reconcile may take
	// (--reconcile-timeout); zero values are the defaults.
	Bounds proxy.Bounds
}

// validate checks the options a person sets, naming the flag and value.
func (o Options) validate() error {
	var errs []error
	if o.Bounds.Workers < 0 {
		errs = append(errs, fmt.Errorf("--max-concurrent-reconciles %d: must be positive (0 takes the default, %d)", o.Bounds.Workers, proxy.DefaultWorkers))
	}
	if o.Timing.Drain < 0 {
		errs = append(errs, fmt.Errorf("--drain-period %s: must be positive (0 takes the default, %s)", o.Timing.Drain, proxy.DefaultDrain))
	}
	if o.Bounds.Deadline < 0 {
		errs = append(errs, fmt.Errorf("--reconcile-timeout %s: must be positive (0 takes the default, %s)", o.Bounds.Deadline, proxy.DefaultDeadline))
	}
	for _, n := range o.Webhook.Networks {
		if _, err := netip.ParsePrefix(n); err != nil {
			errs = append(errs, fmt.Errorf("--no-proxy %q: not a network (address/prefix): %w", n, err))
		}
	}
	return errors.Join(errs...)
}

// Run runs the operator until ctx ends. An invalid providers config fails
// it before anything starts.
func Run(ctx context.Context, o Options) error {
	if err := o.validate(); err != nil {
		return err
	}
	cfg, err := config.Load(o.ConfigPath, o.Registry)
	if err != nil {
		return err
	}
	tp, shutdown, err := tracerProvider(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = shutdown(context.WithoutCancel(ctx)) }()
	if o.Prober == nil {
		o.Prober = probe.HTTPProxy{}
	}

	restConfig, err := o.RestConfig()
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	scheme := NewScheme()
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   endpoints.CacheOptions(),
		Metrics:                 metricsServer(o),
		HealthProbeBindAddress:  o.ProbeAddr,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		// A replica stopped gently (a rollout, a drain) hands the Lease
		// over at once instead of making the other wait out its 15 s;
		// safe because the process ends when the manager does.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	// The install ID is read once: the marks of every instance depend on it.
	if cfg.InstallID, err = identity.Resolve(ctx, mgr.GetAPIReader(), cfg.InstallID); err != nil {
		return err
	}
	set, err := config.Build(cfg, o.Registry, tp)
	if err != nil {
		return err
	}
	events := mgr.GetEventRecorder("egress-proxies-operator")
	requeue := make(chan event.GenericEvent)
	proxies := &proxy.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: scheme, Recorder: events, Providers: set,
		Prober: o.Prober, DefaultAllowedClients: cfg.DefaultAllowedClients, AllowedClientsWithin: cfg.AllowedClientsWithin, Timing: o.Timing,
		Requeue: requeue, Bounds: o.Bounds, Tracer: tp,
	}
	if err := proxies.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("proxy controller: %w", err)
	}
	if err := (&addresspool.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("address pool controller: %w", err)
	}
	if err := mgr.Add(&gc.Collector{Reader: mgr.GetAPIReader(), Providers: set, Recorder: events, Addresses: mgr.GetClient()}); err != nil {
		return err
	}
	checker := &health.Checker{Client: mgr.GetClient(), Providers: set}
	if err := mgr.Add(checker); err != nil {
		return err
	}
	if o.CredentialsDir != "" {
		if err := mgr.Add(&credentials.Watcher{Dir: o.CredentialsDir, Client: mgr.GetClient(), Requeue: requeue, Health: checker,
			ResetBackoffs: proxies.CredentialsChanged}); err != nil {
			return err
		}
	}
	if err := crmetrics.Registry.Register(metrics.NewBuildInfo(o.Registry.Types())); err != nil {
		return err
	}
	if err := crmetrics.Registry.Register(metrics.NewProxyPhases(mgr.GetClient(), mgr.Elected())); err != nil {
		return err
	}
	if err := crmetrics.Registry.Register(metrics.NewPoolAddresses(mgr.GetClient(), mgr.Elected())); err != nil {
		return err
	}
	if o.Webhook.Port != 0 {
		if err := binding.Setup(mgr, o.Webhook); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting", "installID", cfg.InstallID, "providers", set.Names(), "compiledIn", o.Registry.Types())
	if len(cfg.Providers) == 0 {
		// Valid (the shipped config names none), but worth saying plainly.
		ctrl.Log.Info("the providers config names no provider: every Proxy waits with ProviderNotConfigured until an entry names its provider",
			"config", o.ConfigPath, "compiledIn", o.Registry.Types())
	}
	return mgr.Start(ctx)
}

// leaderElectionID names the Lease the replicas elect their leader with.
const leaderElectionID = "egress-proxies-operator.egressproxies.io"

// NewScheme returns a scheme with the Kubernetes types and this API.
func NewScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	return scheme
}
