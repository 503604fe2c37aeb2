package binding

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Options configure the Pod webhook (cmd/main.go's --webhook-* flags).
type Options struct {
	// Port is the webhook server's port; 0 turns the webhook off.
	Port int
	// CertDir is a writable directory (an emptyDir) the operator copies
	// the Secret's tls.crt and tls.key into (certfiles.go).
	CertDir string
	// Namespace is the operator's namespace, where SecretName and
	// ServiceName live.
	Namespace string
	// SecretName is the Secret holding the webhook's CA and serving
	// certificate; ServiceName the Service the API server calls;
	// ConfigurationName the MutatingWebhookConfiguration whose caBundle
	// the rotator keeps current.
	SecretName, ServiceName, ConfigurationName string
	// Domain is the cluster's DNS domain.
	Domain string
	// Networks are networks every bound Pod reaches directly (--no-proxy).
	Networks []string
}

// validate names every flag the webhook needs and was not given.
func (o Options) validate() error {
	var missing []string
	for _, f := range []struct{ flag, value string }{
		{"--webhook-cert-dir", o.CertDir}, {"--webhook-namespace (or POD_NAMESPACE)", o.Namespace}, {"--webhook-secret", o.SecretName},
		{"--webhook-service", o.ServiceName}, {"--webhook-configuration", o.ConfigurationName}, {"--cluster-domain", o.Domain},
	} {
		if f.value == "" {
			missing = append(missing, f.flag)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the Pod webhook (--webhook-port %d) needs %s", o.Port, strings.Join(missing, ", "))
	}
	return nil
}

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=get;list;watch;update

// Setup adds the Pod webhook to mgr: cert-controller's rotator makes and
// renews the CA and serving certificate in the Secret and injects the CA
// into the webhook configuration; the webhook server starts once the
// certificate is in CertDir, and the replica is not ready
// before (so the webhook Service never sends the API server to a replica
// that cannot serve TLS). Every replica serves: admission does not wait
// for the leader.
func Setup(mgr ctrl.Manager, o Options) error {
	if err := o.validate(); err != nil {
		return err
	}
	ready := make(chan struct{})
	if err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName},
		CertDir:        o.CertDir,
		CAName:         "egress-proxies-webhook-ca",
		CAOrganization: "egress-proxies-operator",
		DNSName:        fmt.Sprintf("%s.%s.svc", o.ServiceName, o.Namespace),
		ExtraDNSNames:  []string{fmt.Sprintf("%s.%s.svc.%s", o.ServiceName, o.Namespace, o.Domain)},
		IsReady:        ready,
		Webhooks:       []rotator.WebhookInfo{{Name: o.ConfigurationName, Type: rotator.Mutating}},
		FieldOwner:     "egress-proxies-operator",
	}); err != nil {
		return fmt.Errorf("webhook certificate rotator: %w", err)
	}
	if err := mgr.Add(&certFiles{Reader: mgr.GetAPIReader(), Secret: types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName}, Dir: o.CertDir,
		Waiting: time.Second, Written: 30 * time.Second}); err != nil {
		return err
	}
	server := webhook.NewServer(webhook.Options{Port: o.Port, CertDir: o.CertDir})
	server.Register(Path, &webhook.Admission{Handler: &Binder{
		Reader: mgr.GetAPIReader(), Proxies: mgr.GetClient(), Domain: o.Domain,
		Cluster: &Discovery{Reader: mgr.GetAPIReader(), Domain: o.Domain, Networks: o.Networks},
	}})
	var started atomic.Bool
	if err := mgr.AddReadyzCheck("webhook", func(req *http.Request) error {
		if !started.Load() {
			return errors.New("the webhook's certificate is not written yet")
		}
		return server.StartedChecker()(req)
	}); err != nil {
		return err
	}
	// A Runnable that waits for the certificate, then runs the server:
	// the server reads its certificate when it starts.
	return mgr.Add(runAfter(ready, func(ctx context.Context) error {
		started.Store(true)
		return server.Start(ctx)
	}))
}

// runAfter runs start once ready is closed, on every replica (no leader
// election: the webhook Service sends to any ready replica).
func runAfter(ready <-chan struct{}, start func(context.Context) error) webhookRunnable {
	return webhookRunnable{ready: ready, start: start}
}

type webhookRunnable struct {
	ready <-chan struct{}
	start func(context.Context) error
}

func (r webhookRunnable) Start(ctx context.Context) error {
	select {
	case <-r.ready:
		return r.start(ctx)
	case <-ctx.Done():
		return nil
	}
}

func (webhookRunnable) NeedLeaderElection() bool { return false }
