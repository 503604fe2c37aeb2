package proxy

import (
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// CredentialsChanged forgets every Proxy's back-off after transient
// failures and wakes the operations waiting one out: the
// credentials.Watcher calls it when the credential files change, before it
// reconciles the Proxies that are not Ready.
func (r *Reconciler) CredentialsChanged() {
	if r.ops != nil {
		r.ops.ResetBackoffs()
	}
}

// requeueSource is where the controller hears the watcher's events. A
// reconciler without a watcher gets a channel nothing writes to.
func (r *Reconciler) requeueSource() source.Source {
	ch := r.Requeue
	if ch == nil {
		ch = make(chan event.GenericEvent)
	}
	return source.Channel(ch, &handler.EnqueueRequestForObject{})
}

// credentialsReason is the condition reason for a provider error: a
// credential file that cannot be used gets a reason of its own, found by
// type whatever the provider wrapped around it, so the Proxy says what to
// fix rather than BackendUnavailable or ProviderError.
func credentialsReason(err error, reason string) string {
	if errors.As(err, new(*contract.CredentialError)) {
		return v1alpha1.ReasonCredentialsUnavailable
	}
	return reason
}
