package binding

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups="",resources=nodes,verbs=list
// +kubebuilder:rbac:groups=networking.k8s.io,resources=servicecidrs,verbs=list
// +kubebuilder:rbac:groups="",resources=services,verbs=get

// Discovery reads the cluster's networks and API server addresses for
// NoProxy, at most once per TTL: admission asks on every bound Pod, and
// the networks change rarely (a new Node's podCIDR, a ServiceCIDR added).
type Discovery struct {
	// Reader reads uncached (the manager's API reader): the operator does
	// not watch Nodes, and its cache holds only its own Services and
	// EndpointSlices.
	Reader client.Reader
	// Domain is the cluster's DNS domain (--cluster-domain).
	Domain string
	// Networks are networks every bound Pod reaches directly (--no-proxy),
	// for clusters whose Service network no ServiceCIDR object states.
	Networks []string
	// TTL is how long a reading is used; 0 is DefaultTTL.
	TTL time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	mu   sync.Mutex
	last Cluster
	at   time.Time
}

// DefaultTTL is how long Discovery keeps a reading: a new Node's Pod
// network reaches NO_PROXY within a minute.
const DefaultTTL = time.Minute

// Cluster returns the cluster as last read, reading it again when the
// reading is older than the TTL. A failed read is returned as an error,
// never as a NO_PROXY missing the cluster's networks.
func (d *Discovery) Cluster(ctx context.Context) (Cluster, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now
	if d.Now != nil {
		now = d.Now
	}
	ttl := d.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if !d.at.IsZero() && now().Sub(d.at) < ttl {
		return d.last, nil
	}
	c, err := d.read(ctx)
	if err != nil {
		return Cluster{}, err
	}
	d.last, d.at = c, now()
	return c, nil
}

func (d *Discovery) read(ctx context.Context) (Cluster, error) {
	c := Cluster{Domain: d.Domain}
	var svc corev1.Service
	if err := d.Reader.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, &svc); err != nil {
		return c, fmt.Errorf("reading Service default/kubernetes for NO_PROXY: %w", err)
	}
	c.APIServer = append(c.APIServer, svc.Spec.ClusterIPs...)
	var slices discoveryv1.EndpointSliceList
	if err := d.Reader.List(ctx, &slices, client.InNamespace("default"), client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}); err != nil {
		return c, fmt.Errorf("listing the API server's EndpointSlices for NO_PROXY: %w", err)
	}
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			c.APIServer = append(c.APIServer, ep.Addresses...)
		}
	}
	var cidrs networkingv1.ServiceCIDRList
	switch err := d.Reader.List(ctx, &cidrs); {
	case meta.IsNoMatchError(err):
		// A cluster older than ServiceCIDR (Kubernetes 1.33): --no-proxy
		// says its Service network.
	case err != nil:
		return c, fmt.Errorf("listing ServiceCIDRs for NO_PROXY: %w", err)
	}
	for _, s := range cidrs.Items {
		c.ServiceNetworks = append(c.ServiceNetworks, s.Spec.CIDRs...)
	}
	c.ServiceNetworks = append(c.ServiceNetworks, d.Networks...)
	var nodes corev1.NodeList
	if err := d.Reader.List(ctx, &nodes); err != nil {
		return c, fmt.Errorf("listing Nodes for their Pod networks for NO_PROXY: %w", err)
	}
	for _, n := range nodes.Items {
		c.PodNetworks = append(c.PodNetworks, n.Spec.PodCIDRs...)
	}
	return c, nil
}
