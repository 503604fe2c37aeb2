package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// managedBy marks the EndpointSlice as ours, so the EndpointSlice
// controller leaves it alone.
const managedBy = "egress-proxies-operator.egressproxies.io"

// ensureService makes <proxy>.<namespace>.svc:<port> reach the serving
// instance: a selector-less Service and the EndpointSlice that points it at
// the VM's address. Both are owned by the Proxy, so they go with it.
func (r *ProxyReconciler) ensureService(ctx context.Context, proxy *v1alpha1.Proxy) error {
	port := proxy.Spec.Port
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: proxy.Name, Namespace: proxy.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, svc, func() error {
		svc.Spec.Selector = nil
		svc.Spec.Ports = []corev1.ServicePort{{
			Name: "proxy", Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(port),
		}}
		return controllerutil.SetControllerReference(proxy, svc, r.Scheme)
	}); err != nil {
		return fmt.Errorf("service %s: %w", proxy.Name, err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: proxy.Name, Namespace: proxy.Namespace},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, slice, func() error {
		if slice.Labels == nil {
			slice.Labels = map[string]string{}
		}
		slice.Labels[discoveryv1.LabelServiceName] = proxy.Name
		slice.Labels[discoveryv1.LabelManagedBy] = managedBy
		slice.Endpoints = []discoveryv1.Endpoint{{
			Addresses:  []string{proxy.Status.Instance.IP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}}
		slice.Ports = []discoveryv1.EndpointPort{{
			Name: ptr.To("proxy"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(port),
		}}
		return controllerutil.SetControllerReference(proxy, slice, r.Scheme)
	}); err != nil {
		return fmt.Errorf("endpointslice %s: %w", proxy.Name, err)
	}
	return nil
}
