// Package endpoints publishes a Proxy: the selector-less Service of its
// name and the EndpointSlices that point it at the replicas that answer,
// written only when the Proxy controls them (a user's object of that name
// is a ConflictError, left untouched).
package endpoints

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// Publisher writes a Proxy's Service and EndpointSlices. Client is the
// manager's (its cache holds only labelled objects, CacheOptions); Reader
// reads the API server, for an object the cache lacks; Scheme sets the
// Proxy as their controller.
type Publisher struct {
	Client client.Client
	Reader client.Reader
	Scheme *runtime.Scheme
}

// ManagedBy marks the EndpointSlice as ours, so the EndpointSlice
// controller leaves it alone.
const ManagedBy = "egress-proxies-operator.egressproxies.io"

// Ensure makes <proxy>.<namespace>.svc:<port> reach the serving
// instance: a selector-less Service and the EndpointSlice that points it at
// the VM's address. Both are labelled with v1alpha1.LabelProxy and controlled by the
// Proxy, so they go with it. Both are claimed before either is written: a
// Service or EndpointSlice of that name the operator did not make is never
// modified, and neither is made beside it (an EndpointSlice of ours would
// feed the user's Service, a Service of ours would take the user's
// endpoints).
func (p *Publisher) Ensure(ctx context.Context, proxy *v1alpha1.Proxy) error {
	port := proxy.Spec.Port
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: proxy.Name, Namespace: proxy.Namespace}}
	svcExists, err := p.claim(ctx, proxy, svc, "Service")
	if err != nil {
		return err
	}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: proxy.Name, Namespace: proxy.Namespace}}
	sliceExists, err := p.claim(ctx, proxy, slice, "EndpointSlice")
	if err != nil {
		return err
	}
	if err := p.write(ctx, proxy, svc, svcExists, func() {
		svc.Spec.Selector = nil
		svc.Spec.Ports = []corev1.ServicePort{{
			Name: "proxy", Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(port),
		}}
	}); err != nil {
		return fmt.Errorf("service %s: %w", proxy.Name, err)
	}
	if err := p.write(ctx, proxy, slice, sliceExists, func() {
		if slice.Labels == nil {
			slice.Labels = map[string]string{}
		}
		slice.Labels[discoveryv1.LabelServiceName] = proxy.Name
		slice.Labels[discoveryv1.LabelManagedBy] = ManagedBy
		slice.AddressType = discoveryv1.AddressTypeIPv4
		// One endpoint per answering replica, none when none answers.
		slice.Endpoints = []discoveryv1.Endpoint{}
		for _, ip := range replica.ReadyEndpoints(proxy)[port] {
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{ip},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			})
		}
		slice.Ports = []discoveryv1.EndpointPort{{
			Name: ptr.To("proxy"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(port),
		}}
	}); err != nil {
		return fmt.Errorf("endpointslice %s: %w", proxy.Name, err)
	}
	// Also for one replica: a roll of a port may have been cut short by
	// scaling down, and its old port's EndpointSlice must go.
	return p.ensureRollingSlices(ctx, proxy)
}
