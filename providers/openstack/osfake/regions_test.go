package osfake_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servergroups"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/pagination"

	"github.com/egress-proxies/egress-proxies-operator/providers/openstack/osfake"
)

// Each region runs its own Neutron and Nova: what one region's services
// made is not in another region's lists, its ID is 404 there, a server
// cannot take another region's port, and each region's quota counts its
// own. Before, one Neutron served both regions: a floating IP made in
// RegionOne was listed by RegionTwo as its own, so a provider that asked
// the wrong region's Neutron passed.
func TestRegionsKeepTheirOwnResources(t *testing.T) {
	ext := &osfake.ExternalNetwork{ID: "5b3c3a52-4c5e-4c44-9a5c-7b0e2d6f9a10", CIDR: "203.0.113.0/29"}
	c, compute := start(t, func(o *osfake.Options) {
		o.Regions = []string{"RegionOne", "RegionTwo"}
		o.External = ext
		o.Quota.FloatingIPs, o.Quota.SecurityGroups, o.Quota.ServerGroups = 1, 1, 1
	})
	ctx := context.Background()
	in := func(region string) (net, comp *gophercloud.ServiceClient) {
		t.Helper()
		eo := gophercloud.EndpointOpts{Region: region}
		net, err := openstack.NewNetworkV2(compute.ProviderClient, eo)
		if err != nil {
			t.Fatal(err)
		}
		comp, err = openstack.NewComputeV2(compute.ProviderClient, eo)
		if err != nil {
			t.Fatal(err)
		}
		comp.Microversion = compute.Microversion
		return net, comp
	}
	n1, c1 := in("RegionOne")
	n2, c2 := in("RegionTwo")
	networkID := c.Options().Network.ID

	// RegionOne makes one of each.
	f1, err := floatingips.Create(ctx, n1, floatingips.CreateOpts{FloatingNetworkID: ext.ID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	p1, err := ports.Create(ctx, n1, ports.CreateOpts{NetworkID: networkID, Name: "one"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	g1, err := groups.Create(ctx, n1, groups.CreateOpts{Name: "one"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	sg1, err := servergroups.Create(ctx, c1, servergroups.CreateOpts{Name: "one", Policies: []string{"anti-affinity"}}).Extract()
	if err != nil {
		t.Fatal(err)
	}

	// RegionTwo lists none of them and finds none by ID.
	fips := all(t, floatingips.List(n2, floatingips.ListOpts{}), floatingips.ExtractFloatingIPs)
	prts := all(t, ports.List(n2, ports.ListOpts{}), ports.ExtractPorts)
	grps := all(t, groups.List(n2, groups.ListOpts{}), groups.ExtractGroups)
	sgs := all(t, servergroups.List(c2, servergroups.ListOpts{}), servergroups.ExtractServerGroups)
	if len(fips)+len(prts)+len(grps)+len(sgs) > 0 {
		t.Errorf("RegionTwo lists RegionOne's floating IPs %v, ports %v, security groups %v, server groups %v", fips, prts, grps, sgs)
	}
	_, err = floatingips.Get(ctx, n2, f1.ID).Extract()
	wantStatus(t, "RegionOne's floating IP in RegionTwo", err, http.StatusNotFound)
	_, err = ports.Get(ctx, n2, p1.ID).Extract()
	wantStatus(t, "RegionOne's port in RegionTwo", err, http.StatusNotFound)
	_, err = groups.Get(ctx, n2, g1.ID).Extract()
	wantStatus(t, "RegionOne's security group in RegionTwo", err, http.StatusNotFound)
	_, err = servergroups.Get(ctx, c2, sg1.ID).Extract()
	wantStatus(t, "RegionOne's server group in RegionTwo", err, http.StatusNotFound)
	err = floatingips.Delete(ctx, n2, f1.ID).ExtractErr()
	wantStatus(t, "deleting RegionOne's floating IP in RegionTwo", err, http.StatusNotFound)
	err = ports.Delete(ctx, n2, p1.ID).ExtractErr()
	wantStatus(t, "deleting RegionOne's port in RegionTwo", err, http.StatusNotFound)

	// A server of RegionTwo cannot take RegionOne's port (Nova's
	// _validate_requested_port_ids asks its own region's Neutron).
	_, err = servers.Create(ctx, c2, servers.CreateOpts{
		Name: "two", FlavorRef: "1", ImageRef: c.Options().Images[0].ID, Networks: []servers.Network{{Port: p1.ID}},
	}, nil).Extract()
	wantStatus(t, "RegionOne's port for a RegionTwo server", err, http.StatusBadRequest)
	if err != nil && !strings.Contains(err.Error(), "Port id "+p1.ID+" could not be found.") {
		t.Errorf("RegionOne's port for a RegionTwo server: %v", err)
	}

	// Each region's quota counts its own: RegionTwo still has one of
	// each, and its floating IP has an address of its own.
	f2, err := floatingips.Create(ctx, n2, floatingips.CreateOpts{FloatingNetworkID: ext.ID}).Extract()
	if err != nil {
		t.Fatalf("RegionTwo's first floating IP: %v", err)
	}
	if f2.FloatingIP == f1.FloatingIP {
		t.Errorf("both regions hold %s", f1.FloatingIP)
	}
	if _, err := groups.Create(ctx, n2, groups.CreateOpts{Name: "two"}).Extract(); err != nil {
		t.Errorf("RegionTwo's first security group: %v", err)
	}
	if _, err := servergroups.Create(ctx, c2, servergroups.CreateOpts{Name: "two", Policies: []string{"anti-affinity"}}).Extract(); err != nil {
		t.Errorf("RegionTwo's first server group: %v", err)
	}
	_, err = floatingips.Create(ctx, n1, floatingips.CreateOpts{FloatingNetworkID: ext.ID}).Extract()
	wantStatus(t, "RegionOne's second floating IP", err, http.StatusConflict)

	// The snapshots name each one's region.
	regions := map[string]string{}
	for _, f := range c.FloatingIPs() {
		regions[f.ID] = f.Region
	}
	for _, p := range c.Ports() {
		regions[p.ID] = p.Region
	}
	if regions[f1.ID] != "RegionOne" || regions[f2.ID] != "RegionTwo" || regions[p1.ID] != "RegionOne" {
		t.Errorf("snapshots' regions %v; want %s and %s in RegionOne, %s in RegionTwo", regions, f1.ID, p1.ID, f2.ID)
	}
}

// all reads every page of a list.
func all[T any](t *testing.T, pager interface {
	AllPages(context.Context) (pagination.Page, error)
}, extract func(pagination.Page) ([]T, error)) []T {
	t.Helper()
	page, err := pager.AllPages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out, err := extract(page)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
