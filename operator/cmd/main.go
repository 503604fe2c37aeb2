// Command egress-proxies-operator runs the operator: the Proxy reconciler,
// the garbage collector and the health checker, over the providers named
// in its providers config and compiled in by build tags
// (go build -tags "vsphere libvirt").
package main

import (
	"flag"
	"os"
	"strings"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/app"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller/proxy"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// constructors holds the provider types compiled in; each
// providers_<type>.go file registers one behind its build tag.
var constructors = providers.Registry{}

func main() {
	o := app.Options{Registry: constructors}
	flag.StringVar(&o.ConfigPath, "providers-config", "/etc/egress-proxies/providers.yaml", "Path of the providers config file.")
	flag.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8443", "Address the metrics endpoint binds to; 0 disables it.")
	flag.BoolVar(&o.SecureMetrics, "metrics-secure", true, "Serve metrics over HTTPS to clients a TokenReview authenticates and a SubjectAccessReview allows GET /metrics; false serves plain HTTP to anyone.")
	flag.StringVar(&o.MetricsCertDir, "metrics-cert-dir", "", "Directory with the metrics endpoint's tls.crt and tls.key (reloaded on change); without them the certificate is self-signed.")
	flag.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz endpoints bind to.")
	flag.BoolVar(&o.LeaderElect, "leader-elect", false, "Elect a leader, so only one replica reconciles.")
	flag.StringVar(&o.CredentialsDir, "credentials-dir", "/etc/egress-proxies/credentials",
		"Directory the credentials Secret is mounted at: a change of its files retries the Proxies waiting on a credential at once. Empty: not watched.")
	flag.IntVar(&o.Bounds.Workers, "max-concurrent-reconciles", proxy.DefaultWorkers, "How many Proxies reconcile at once; provider calls run beside these workers, capped per provider by limits.concurrency.")
	flag.DurationVar(&o.Bounds.Deadline, "reconcile-timeout", proxy.DefaultDeadline, "The deadline of one reconcile (its API server calls; provider calls are not bounded by it).")
	flag.DurationVar(&o.Timing.Drain, "drain-period", proxy.DefaultDrain, "How long a VM that served through a Proxy's Service keeps running after it left the Service's endpoints, before it is deleted (a replaced or scaled-away replica): new connections leave it, open ones may finish.")
	flag.DurationVar(&o.Timing.Watch, "serving-watch-period", proxy.DefaultWatch, "How often every serving VM of a Proxy of more than one replica is probed between the Proxy's checks; one that does not answer is checked at once, and leaves the Service if it is down. Negative: no watch (a dead replica is found at the next check, up to a minute).")
	flag.IntVar(&o.Webhook.Port, "webhook-port", 0, "Port of the Pod webhook that binds workloads to a Proxy (label egressproxies.io/egress-via); 0 turns it off.")
	flag.StringVar(&o.Webhook.CertDir, "webhook-cert-dir", "/var/run/egress-proxies/webhook-certs", "Directory the webhook's certificate Secret is mounted at.")
	flag.StringVar(&o.Webhook.Namespace, "webhook-namespace", os.Getenv("POD_NAMESPACE"), "Namespace of the webhook's Secret and Service (default: $POD_NAMESPACE).")
	flag.StringVar(&o.Webhook.SecretName, "webhook-secret", "", "Secret the webhook's CA and serving certificate are written to and renewed in.")
	flag.StringVar(&o.Webhook.ServiceName, "webhook-service", "", "Service the API server calls the webhook through (the certificate's name).")
	flag.StringVar(&o.Webhook.ConfigurationName, "webhook-configuration", "", "MutatingWebhookConfiguration whose caBundle is kept current.")
	flag.StringVar(&o.Webhook.Domain, "cluster-domain", "cluster.local", "The cluster's DNS domain: bound Pods reach .<domain> names directly, and the Proxy's Service by its full name.")
	flag.Func("no-proxy", "Comma-separated networks every bound Pod reaches directly, beside the ServiceCIDRs and Nodes' podCIDRs read from the cluster (a Service network no ServiceCIDR states).", func(v string) error {
		for n := range strings.SplitSeq(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				o.Webhook.Networks = append(o.Webhook.Networks, n)
			}
		}
		return nil
	})
	// Nanosecond timestamps unless --zap-time-encoding says otherwise: a
	// failover lasts seconds, and a log to the second cannot say where
	// they went.
	zapOpts := zap.Options{TimeEncoder: zapcore.RFC3339NanoTimeEncoder}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	o.RestConfig = ctrl.GetConfig
	if err := app.Run(ctrl.SetupSignalHandler(), o); err != nil {
		ctrl.Log.Error(err, "operator stopped")
		os.Exit(1)
	}
}
