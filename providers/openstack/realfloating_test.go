package openstack

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

// TestRealCloudFloatingIPs runs the harness's rules that floating IPs
// change against the real services, with the tenant's network routed to
// the lane's external network (hack/openstack/bootstrap.py): each replica
// gets a floating IP of its own, reported as its egress address, kept
// across a replacement (the same address on the new server's port) and
// released only when asked (EgressKeptPerReplica); a static fixed address
// beside it (StaticAddressDelivered); and the delete rules, as a server
// with a floating IP is deleted. Neutron allocates and associates through
// the API alone: no L3 agent runs, so no NAT is programmed and no packet
// leaves the namespace.
func TestRealCloudFloatingIPs(t *testing.T) {
	external := os.Getenv("OPENSTACK_TEST_EXTERNAL_NETWORK")
	if external == "" {
		t.Skip("skipped: OPENSTACK_TEST_EXTERNAL_NETWORK is not set (the lane's hack/openstack/up.sh sets it)")
	}
	rc := startRealCloud(t)
	rc.tenant.routeTo(t, external)
	region := rc.tenant.cfg.Regions["one"]
	region.FloatingIPs = &FloatingIPs{Network: external}
	rc.tenant.cfg.Regions["one"] = region
	ghosts := watchGhosts(t, rc)
	contracttest.Run(t, contracttest.Config{
		NewProvider: func(t *testing.T) contract.Provider { return ghosts.provider(t, rc) },
		Backend:     &realControl{rc: rc, t: t},
		Placement:   contract.Placement{Region: "one", Zone: "zone", MachineType: "small", Image: "proxy"},
		// Every server boots on a port of the provider's, whose address
		// Neutron gives when it is made.
		IPAssignedAtCreate: true,
		StaticNetwork:      rc.tenant.static,
		NetworkFromBackend: true,
		CallBudget:         rc.tenant.cfg.CallTimeout.Duration,
		WaitTimeout:        2 * time.Minute,
		NamePrefix:         "osreal-fip",
		Rules:              []string{"EgressKeptPerReplica", "StaticAddressDelivered", "RepeatCreate", "GetAfterDelete", "DeleteTwice"},
	})
}

// TestRealCloudFloatingIPSet: the same with floatingIPs.addresses, a set
// the cloud's admin allocated in the tenant's project beforehand: the
// replicas draw from it (under If-Match on the revision) and give their
// addresses back, and the provider neither creates nor deletes one.
func TestRealCloudFloatingIPSet(t *testing.T) {
	external := os.Getenv("OPENSTACK_TEST_EXTERNAL_NETWORK")
	if external == "" {
		t.Skip("skipped: OPENSTACK_TEST_EXTERNAL_NETWORK is not set (the lane's hack/openstack/up.sh sets it)")
	}
	rc := startRealCloud(t)
	rc.tenant.routeTo(t, external)
	var set []string
	for range 3 {
		f, err := floatingips.Create(context.Background(), rc.admin.network, floatingips.CreateOpts{FloatingNetworkID: external, ProjectID: rc.tenant.projectID}).Extract()
		if err != nil {
			t.Fatalf("allocate a floating IP in %s: %v", rc.tenant.name, err)
		}
		set = append(set, f.FloatingIP)
	}
	region := rc.tenant.cfg.Regions["one"]
	region.FloatingIPs = &FloatingIPs{Network: external, Addresses: set}
	rc.tenant.cfg.Regions["one"] = region
	ghosts := watchGhosts(t, rc)
	contracttest.Run(t, contracttest.Config{
		NewProvider:        func(t *testing.T) contract.Provider { return ghosts.provider(t, rc) },
		Backend:            &realControl{rc: rc, t: t},
		Placement:          contract.Placement{Region: "one", Zone: "zone", MachineType: "small", Image: "proxy"},
		IPAssignedAtCreate: true,
		StaticNetwork:      rc.tenant.static,
		NetworkFromBackend: true,
		CallBudget:         rc.tenant.cfg.CallTimeout.Duration,
		WaitTimeout:        2 * time.Minute,
		NamePrefix:         "osreal-fipset",
		Rules:              []string{"EgressKeptPerReplica", "GetAfterDelete"},
	})
	pages, err := floatingips.List(rc.admin.network, floatingips.ListOpts{ProjectID: rc.tenant.projectID}).AllPages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	left, _ := floatingips.ExtractFloatingIPs(pages)
	for _, f := range left {
		if !slices.Contains(set, f.FloatingIP) || f.PortID != "" || f.Description != "" {
			t.Errorf("after the rules the project holds %s (port %q, description %q): want only the set's addresses, free and unmarked", f.FloatingIP, f.PortID, f.Description)
		}
	}
	if len(left) != len(set) {
		t.Errorf("after the rules the project holds %d floating IPs, want the set's %d", len(left), len(set))
	}
}

// routeTo gives the tenant a router with its gateway on the external
// network and an interface on the tenant's subnet: what a floating IP of
// that network needs to be associated with a port of the subnet
// (neutron/db/l3_db.py get_router_for_floatingip). Made in the tenant's
// project by the admin, as the network is.
func (tn *tenant) routeTo(t *testing.T, external string) {
	t.Helper()
	ctx := context.Background()
	r, err := routers.Create(ctx, tn.admin.network, routers.CreateOpts{
		Name: tn.name, ProjectID: tn.projectID, GatewayInfo: &routers.GatewayInfo{NetworkID: external},
	}).Extract()
	if err != nil {
		t.Fatalf("router of %s: %v", tn.name, err)
	}
	tn.router = r.ID
	if _, err := routers.AddInterface(ctx, tn.admin.network, r.ID, routers.AddInterfaceOpts{SubnetID: tn.subnet}).Extract(); err != nil {
		t.Fatalf("router of %s: interface on its subnet: %v", tn.name, err)
	}
}

// unroute deletes the tenant's floating IPs (a failed rule may leave some)
// and its router: a router's interface port cannot be deleted through the
// port API, so this comes before the network's ports.
func (tn *tenant) unroute(t *testing.T) {
	if tn.router == "" {
		return
	}
	ctx := context.Background()
	a := tn.admin
	if pages, err := floatingips.List(a.network, floatingips.ListOpts{ProjectID: tn.projectID}).AllPages(ctx); err == nil {
		left, _ := floatingips.ExtractFloatingIPs(pages)
		for _, f := range left {
			t.Logf("removing floating IP %s %s left in %s", f.ID, f.FloatingIP, tn.name)
			_ = floatingips.Delete(ctx, a.network, f.ID).ExtractErr()
		}
	}
	if _, err := routers.RemoveInterface(ctx, a.network, tn.router, routers.RemoveInterfaceOpts{SubnetID: tn.subnet}).Extract(); err != nil && !gophercloud.ResponseCodeIs(err, 404) {
		t.Logf("router of %s: remove its interface: %v", tn.name, err)
	}
	if err := routers.Delete(ctx, a.network, tn.router).ExtractErr(); err != nil && !gophercloud.ResponseCodeIs(err, 404) {
		t.Logf("delete router of %s: %v", tn.name, err)
	}
}
