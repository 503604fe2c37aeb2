package endpoints

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// An EndpointSlice has one port for all its endpoints. While the replicas
// of a Proxy roll onto a new spec.port, those not replaced yet listen on
// the old port: each such port gets an EndpointSlice of its own,
// <proxy>-port-<port>, beside the Proxy's <proxy> one, and is deleted once
// no answering replica listens on it. The Service's port name "proxy"
// matches them all, so clients reach every answering replica.

// labelRollingPort marks an EndpointSlice of the replicas on an old port.
const labelRollingPort = "egressproxies.io/rolling-port"

// rollingSliceName is the EndpointSlice of the replicas listening on port.
func rollingSliceName(proxy *v1alpha1.Proxy, port int32) string {
	return fmt.Sprintf("%s-port-%d", proxy.Name, port)
}

// ensureRollingSlices writes the EndpointSlice of each old port an
// answering replica listens on, and deletes the Proxy's others.
func (p *Publisher) ensureRollingSlices(ctx context.Context, proxy *v1alpha1.Proxy) error {
	byPort := replica.ReadyEndpoints(proxy)
	for port, ips := range byPort {
		if port == proxy.Spec.Port {
			continue
		}
		slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: rollingSliceName(proxy, port), Namespace: proxy.Namespace}}
		exists, err := p.claim(ctx, proxy, slice, "EndpointSlice")
		if err != nil {
			return err
		}
		if err := p.write(ctx, proxy, slice, exists, func() {
			slice.Labels = map[string]string{
				discoveryv1.LabelServiceName: proxy.Name,
				discoveryv1.LabelManagedBy:   ManagedBy,
				labelRollingPort:             strconv.Itoa(int(port)),
			}
			slice.AddressType = discoveryv1.AddressTypeIPv4
			slice.Endpoints = make([]discoveryv1.Endpoint, 0, len(ips))
			for _, ip := range ips {
				slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
					Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
				})
			}
			slice.Ports = []discoveryv1.EndpointPort{{
				Name: ptr.To("proxy"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(port),
			}}
		}); err != nil {
			return fmt.Errorf("endpointslice %s: %w", slice.Name, err)
		}
	}
	var list discoveryv1.EndpointSliceList
	if err := p.Client.List(ctx, &list, client.InNamespace(proxy.Namespace), client.MatchingLabels{v1alpha1.LabelProxy: proxy.Name},
		client.HasLabels{labelRollingPort}); err != nil {
		return fmt.Errorf("listing the Proxy's EndpointSlices: %w", err)
	}
	for i := range list.Items {
		s := &list.Items[i]
		port, err := strconv.Atoi(s.Labels[labelRollingPort])
		if err == nil && int32(port) != proxy.Spec.Port && len(byPort[int32(port)]) > 0 {
			continue
		}
		if !metav1.IsControlledBy(s, proxy) {
			continue
		}
		uid := s.UID
		if err := p.Client.Delete(ctx, s, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting endpointslice %s: %w", s.Name, err)
		}
	}
	return nil
}
