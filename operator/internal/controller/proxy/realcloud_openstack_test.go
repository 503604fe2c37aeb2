//go:build openstack

package proxy

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controllertest"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
	"github.com/egress-proxies/egress-proxies-operator/providers/openstack"
)

// A Proxy on OpenStack's own services (the lane of hack/openstack/, whose
// project network up.sh routes to its external network) with floatingIPs
// configured, run by an operator assembled as app.Run assembles one with
// the openstack build tag: the Proxy shows its floating IP as its egress
// address while it is still provisioning, the address is a floating IP
// Neutron has associated with the server's port, a spec change that
// replaces the server keeps exactly that address (now on the new server's
// port), and the Proxy's deletion releases it. The proxy port is probed
// on the suite's stand-in: Nova's fake driver boots no guest.
//
// make test-integration-openstack-local runs it (docs/testing.md).
func TestRealCloudProxyKeepsItsFloatingIP(t *testing.T) {
	external := os.Getenv("OPENSTACK_TEST_EXTERNAL_NETWORK")
	if external == "" {
		t.Skip("skipped: OPENSTACK_TEST_EXTERNAL_NETWORK is not set (the lane's hack/openstack/up.sh sets it)")
	}
	env := func(name string) string {
		v := os.Getenv(name)
		if v == "" {
			t.Fatalf("%s is not set (the lane's hack/openstack/up.sh sets it)", name)
		}
		return v
	}
	cloudsFile, cloud, region := env("OPENSTACK_TEST_CLOUDS_FILE"), env("OPENSTACK_TEST_CLOUD"), env("OPENSTACK_TEST_REGION")
	doc := fmt.Sprintf(`providers:
- name: lab-openstack
  type: openstack
  openstack:
    cloudsFile: %s
    cloud: %s
    regions:
      one:
        name: %s
        zones: {zone: %s}
        network: %s
        floatingIPs: {network: %s}
    machineTypes: {small: %s}
    images: {debian-12: %s}
`, cloudsFile, cloud, region, env("OPENSTACK_TEST_ZONE"), env("OPENSTACK_TEST_NETWORK"), external,
		env("OPENSTACK_TEST_FLAVOR"), env("OPENSTACK_TEST_IMAGE"))
	reg := providers.Registry{}
	reg.Register(providers.Typed(openstack.Type, openstack.Config.Validate,
		func(c openstack.Config) (contract.Provider, error) { return openstack.New(c) }))
	network := neutronOf(t, cloudsFile, cloud, region)

	c := startCluster(t)
	startInstallOf(t, c, reg, doc, nil)
	p := proxyAt(t, c, "os-egress", "lab-openstack", v1alpha1.Placement{Region: "one", Zone: "zone", MachineType: "small", Image: "debian-12"})

	// Polled every 50 ms: the server is BUILD for about 10 s on the lane.
	var first *v1alpha1.Proxy
	waitLong(t, "the Proxy shows an egress address", func() bool {
		first = getOn(t, c, p)
		return first != nil && len(first.Status.EgressAddresses) == 1
	})
	t.Logf("first shown: egress address %q in phase %s", first.Status.EgressAddresses, first.Status.Phase)
	if first.Status.Phase == v1alpha1.PhaseReady {
		t.Errorf("the egress address %q showed only once the Proxy was Ready; want it shown while provisioning", first.Status.EgressAddresses)
	}
	ready := readyOnWithin(t, c, p, 3*time.Minute)
	fip := ready.Status.EgressAddresses[0]
	if fip != first.Status.EgressAddresses[0] || ready.Status.Instance.EgressIP != fip {
		t.Errorf("Ready with egress address %q (instance %q), first shown %q", ready.Status.EgressAddresses, ready.Status.Instance.EgressIP, first.Status.EgressAddresses)
	}
	if fip == ready.Status.Instance.IP {
		t.Errorf("the egress address %s is the VM's own fixed address", fip)
	}
	assertAssociated(t, network, fip, ready.Status.Instance.ProviderID)

	if err := retryUpdate(c, p, func(p *v1alpha1.Proxy) { p.Spec.Port = 3129 }); err != nil {
		t.Fatal(err)
	}
	var after *v1alpha1.Proxy
	waitLong(t, "the Proxy serves on a new server", func() bool {
		after = getOn(t, c, p)
		return after != nil && after.Status.Phase == v1alpha1.PhaseReady && after.Status.Instance.ProviderID != ready.Status.Instance.ProviderID
	})
	if !slices.Equal(after.Status.EgressAddresses, []string{fip}) {
		t.Errorf("after the replacement the Proxy shows egress addresses %q, want the same %s", after.Status.EgressAddresses, fip)
	}
	assertAssociated(t, network, fip, after.Status.Instance.ProviderID)

	if err := c.client.Delete(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	waitLong(t, "the Proxy is gone", func() bool { return getOn(t, c, p) == nil })
	if left := floatingIPsAt(t, network, fip); len(left) != 0 {
		t.Errorf("after the Proxy's deletion Neutron still holds floating IP %s (port %q)", fip, left[0].PortID)
	}
}

// neutronOf is a Neutron client with the lane member's credentials, to
// read what the provider made as its user sees it.
func neutronOf(t *testing.T, cloudsFile, cloud, region string) *gophercloud.ServiceClient {
	t.Helper()
	ctx := context.Background()
	ao, _, _, err := clouds.Parse(clouds.WithLocations(cloudsFile), clouds.WithCloudName(cloud))
	if err != nil {
		t.Fatalf("clouds file %s: %v", cloudsFile, err)
	}
	pc, err := gopenstack.AuthenticatedClient(ctx, ao)
	if err != nil {
		t.Fatalf("log in as %s: %v", cloud, err)
	}
	nc, err := gopenstack.NewNetworkV2(pc, gophercloud.EndpointOpts{Region: region})
	if err != nil {
		t.Fatal(err)
	}
	return nc
}

// floatingIPsAt lists the floating IPs with address ip.
func floatingIPsAt(t *testing.T, nc *gophercloud.ServiceClient, ip string) []floatingips.FloatingIP {
	t.Helper()
	pages, err := floatingips.List(nc, floatingips.ListOpts{FloatingIP: ip}).AllPages(context.Background())
	if err != nil {
		t.Fatalf("list floating IP %s: %v", ip, err)
	}
	all, err := floatingips.ExtractFloatingIPs(pages)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// assertAssociated checks that Neutron has floating IP ip associated with
// a port of the server providerID names (region/server-uuid).
func assertAssociated(t *testing.T, nc *gophercloud.ServiceClient, ip, providerID string) {
	t.Helper()
	server := providerID[strings.LastIndex(providerID, "/")+1:]
	all := floatingIPsAt(t, nc, ip)
	if len(all) != 1 || all[0].PortID == "" {
		t.Errorf("Neutron holds %d floating IPs at %s (%+v); want one, associated", len(all), ip, all)
		return
	}
	port, err := ports.Get(context.Background(), nc, all[0].PortID).Extract()
	if err != nil {
		t.Fatalf("port %s of floating IP %s: %v", all[0].PortID, ip, err)
	}
	if port.DeviceID != server {
		t.Errorf("floating IP %s is on port %s of device %q, want server %s (%s)", ip, port.ID, port.DeviceID, server, providerID)
	}
}

// waitLong is eventually for real services: a server's build and delete
// on the lane take seconds each, and tens of seconds under load.
func waitLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	controllertest.EventuallyWithin(t, 3*time.Minute, what, cond)
}

// retryUpdate changes the Proxy's spec on c on its latest copy.
func retryUpdate(c *cluster, p *v1alpha1.Proxy, mutate func(*v1alpha1.Proxy)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var got v1alpha1.Proxy
		if err := c.client.Get(context.Background(), client.ObjectKeyFromObject(p), &got); err != nil {
			return err
		}
		mutate(&got)
		return c.client.Update(context.Background(), &got)
	})
}
