// Package userdata reads the cloud-init a Proxy's VMs are made from: the
// user's own, from the Secret spec.cloudInit names, or the default proxy
// rendered for the Proxy; and, when the operator may not read that Secret,
// says which RoleBinding an admin creates (docs/operator.md).
package userdata

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/images/cloudinit"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// No rule on Secrets here: the generated ClusterRole reads none. Asking
// the API server who the operator is needs no grant beyond the default
// system:basic-user, but is stated so the role says all the operator does.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=selfsubjectreviews,verbs=create

// ReaderRole is the ClusterRole the install ships for reading cloud-init
// Secrets (config/rbac/cloudinit_reader_role.yaml, named with the
// install's prefix). It is bound to nothing: the operator reads Secrets
// only in the namespaces where an admin binds it with a RoleBinding.
const ReaderRole = "egress-proxies-cloudinit-reader"

// ReadError is a failed read of the cloud-init Secret, other than its
// absence: the API server refused (Forbidden) or failed to answer.
type ReadError struct {
	// Secret is the Secret's name.
	Secret string
	Err    error
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("spec.cloudInit: reading Secret %q: %v", e.Secret, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

// Reader reads Proxies' cloud-init.
type Reader struct {
	// Secrets reads cloud-init Secrets straight from the API server: the
	// operator neither caches nor watches every Secret in the cluster,
	// and needs only get on them.
	Secrets client.Reader
	// Reviews asks the API server who the operator is (a
	// SelfSubjectReview), for the RoleBinding a Forbidden read asks for.
	Reviews client.Writer
	// DefaultAllowedClients is what the default cloud-init of a Proxy
	// without allowedClients allows.
	DefaultAllowedClients []string

	self selfName
}

// Read returns the Proxy's cloud-init and whether it is the user's own.
// A missing Secret or key is an error naming the field; any other failed
// read is a *ReadError.
func (u *Reader) Read(ctx context.Context, proxy *v1alpha1.Proxy) (data []byte, user bool, err error) {
	ref := proxy.Spec.CloudInit
	if ref == nil {
		data, err = Default(proxy, u.DefaultAllowedClients)
		return data, false, err
	}
	var secret corev1.Secret
	if err := u.Secrets.Get(ctx, client.ObjectKey{Namespace: proxy.Namespace, Name: ref.Name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, true, fmt.Errorf("spec.cloudInit: Secret %q not found", ref.Name)
		}
		return nil, true, &ReadError{Secret: ref.Name, Err: err}
	}
	data, ok := secret.Data[ref.Key]
	if !ok {
		return nil, true, fmt.Errorf("spec.cloudInit: Secret %q has no key %q", ref.Name, ref.Key)
	}
	return data, true, nil
}

// Default renders the default proxy cloud-init for a Proxy without its
// own: the Proxy's clients, or the operator's default client networks.
func Default(proxy *v1alpha1.Proxy, defaultClients []string) ([]byte, error) {
	clients := make([]string, 0, len(proxy.Spec.AllowedClients))
	for _, c := range proxy.Spec.AllowedClients {
		clients = append(clients, string(c))
	}
	if len(clients) == 0 {
		clients = defaultClients
	}
	if len(clients) == 0 {
		return nil, fmt.Errorf("spec.allowedClients is empty and the operator has no defaultAllowedClients: a proxy is never open to the world")
	}
	return cloudinit.Render(cloudinit.Proxy{Hostname: proxy.Name, Port: proxy.Spec.Port, AllowedClients: clients,
		Destinations: Destinations(proxy), Policy: "Proxy " + proxy.Namespace + "/" + proxy.Name})
}

// Destinations is spec.egress as the default cloud-init takes it; nil
// when unset (any destination).
func Destinations(proxy *v1alpha1.Proxy) []cloudinit.Destination {
	if proxy.Spec.Egress == nil {
		return nil
	}
	out := make([]cloudinit.Destination, 0, len(proxy.Spec.Egress.Destinations))
	for _, d := range proxy.Spec.Egress.Destinations {
		out = append(out, cloudinit.Destination{Host: d.Host, Network: d.Network, Ports: d.Ports})
	}
	return out
}

// EgressError says why spec.egress cannot be rendered, naming the field
// and the value; nil when it can. The CRD refuses the same at admission:
// this holds for a Proxy admitted before its rules.
func EgressError(proxy *v1alpha1.Proxy) error {
	if proxy.Spec.Egress == nil {
		return nil
	}
	if proxy.Spec.CloudInit != nil {
		return errors.New("spec.egress: is rendered into the default cloud-init, and spec.cloudInit replaces it: write the destination rules in your cloud-init, or unset spec.cloudInit")
	}
	if len(proxy.Spec.Egress.Destinations) == 0 {
		return errors.New("spec.egress.destinations: is empty; list a destination, or unset spec.egress to let out any")
	}
	err := cloudinit.ValidateDestinations(Destinations(proxy))
	if fe := (*contract.FieldError)(nil); errors.As(err, &fe) {
		return fmt.Errorf("spec.%s %q: %s", fe.Field, fe.Value, fe.Detail)
	}
	return err
}

// ForbiddenMessage names the RoleBinding that lets the operator read the
// Proxy's cloud-init Secret, as a command to run.
func (u *Reader) ForbiddenMessage(ctx context.Context, proxy *v1alpha1.Proxy, secret string) string {
	subject := "--serviceaccount=<the operator's namespace>:<its ServiceAccount>"
	if name := u.self.get(ctx, u.Reviews); name != "" {
		if sa, ok := strings.CutPrefix(name, "system:serviceaccount:"); ok {
			subject = "--serviceaccount=" + sa
		} else {
			subject = "--user=" + name
		}
	}
	return fmt.Sprintf("spec.cloudInit: the operator may not read Secret %q in namespace %q; "+
		"bind the ClusterRole %s to the operator with a RoleBinding in that namespace: "+
		"kubectl -n %s create rolebinding %s --clusterrole=%s %s",
		secret, proxy.Namespace, ReaderRole, proxy.Namespace, ReaderRole, ReaderRole, subject)
}

// selfName asks the API server once who the operator is (a
// SelfSubjectReview, which every authenticated user may create) and keeps
// the answer; a failed question is asked again next time.
type selfName struct {
	mu   sync.Mutex
	name string
}

func (s *selfName) get(ctx context.Context, c client.Writer) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.name == "" && c != nil {
		review := &authenticationv1.SelfSubjectReview{}
		if err := c.Create(ctx, review); err == nil {
			s.name = review.Status.UserInfo.Username
		}
	}
	return s.name
}
