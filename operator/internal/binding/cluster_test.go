package binding

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDiscoveryReadsTheClusterAndKeepsItForItsTTL(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_000_000, 0)
	d := &Discovery{Reader: k8s, Domain: domain, Networks: []string{"172.30.0.0/16"}, TTL: time.Minute, Now: func() time.Time { return now }}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ttl-node"}, Spec: corev1.NodeSpec{PodCIDR: "10.88.3.0/24", PodCIDRs: []string{"10.88.3.0/24"}}}
	if err := k8s.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), node) })
	c, err := d.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var cidrs networkingv1.ServiceCIDRList
	if err := k8s.List(ctx, &cidrs); err != nil || len(cidrs.Items) == 0 {
		t.Fatalf("the control plane has no ServiceCIDR to read (%v)", err)
	}
	for _, want := range append(cidrs.Items[0].Spec.CIDRs, "172.30.0.0/16") {
		if !slices.Contains(c.ServiceNetworks, want) {
			t.Errorf("ServiceNetworks %v lack %s", c.ServiceNetworks, want)
		}
	}
	if !slices.Contains(c.PodNetworks, "10.88.3.0/24") {
		t.Errorf("PodNetworks %v lack the Node's 10.88.3.0/24", c.PodNetworks)
	}
	if len(c.APIServer) < 2 {
		t.Errorf("APIServer %v: want the kubernetes Service's cluster IP and the API server's endpoint", c.APIServer)
	}

	second := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ttl-node-2"}, Spec: corev1.NodeSpec{PodCIDR: "10.88.4.0/24", PodCIDRs: []string{"10.88.4.0/24"}}}
	if err := k8s.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), second) })
	now = now.Add(time.Minute - time.Second)
	if c, _ := d.Cluster(ctx); slices.Contains(c.PodNetworks, "10.88.4.0/24") {
		t.Errorf("read again within the TTL: %v", c.PodNetworks)
	}
	now = now.Add(time.Second)
	if c, _ := d.Cluster(ctx); !slices.Contains(c.PodNetworks, "10.88.4.0/24") {
		t.Errorf("not read again once the TTL passed: %v", c.PodNetworks)
	}
}
