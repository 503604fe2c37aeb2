package osfake_test

import (
	"context"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servergroups"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/attributestags"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/rules"

	"github.com/egress-proxies/egress-proxies-operator/providers/openstack/osfake"
)

// network is the fake's Neutron client, found in the catalogue as the
// provider finds it (through the version document).
func network(t *testing.T, compute *gophercloud.ServiceClient) *gophercloud.ServiceClient {
	t.Helper()
	n, err := openstack.NewNetworkV2(compute.ProviderClient, gophercloud.EndpointOpts{Region: "RegionOne"})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func wantStatus(t *testing.T, what string, err error, status int) {
	t.Helper()
	if !gophercloud.ResponseCodeIs(err, status) {
		t.Errorf("%s: %v, want %d", what, err, status)
	}
}

// A security group as Zed's Neutron keeps it: two default egress rules, a
// duplicate rule 409, a prefix of the other family 400, tags set after
// create, and no delete while a server uses it.
func TestSecurityGroupLifecycle(t *testing.T) {
	c, compute := start(t, func(o *osfake.Options) { o.HoldBuilds = true })
	n := network(t, compute)
	ctx := context.Background()
	g, err := groups.Create(ctx, n, groups.CreateOpts{Name: "proxy", Description: "d"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Rules) != 2 || g.Rules[0].Direction != "egress" || len(g.Tags) != 0 {
		t.Fatalf("new group: %d rules %+v, tags %v; want the two default egress rules and no tags", len(g.Rules), g.Rules, g.Tags)
	}
	rule := rules.CreateOpts{Direction: rules.DirIngress, EtherType: rules.EtherType4, SecGroupID: g.ID, Protocol: rules.ProtocolTCP,
		PortRangeMin: 3128, PortRangeMax: 3128, RemoteIPPrefix: "10.0.0.0/8"}
	if _, err := rules.Create(ctx, n, rule).Extract(); err != nil {
		t.Fatal(err)
	}
	_, err = rules.Create(ctx, n, rule).Extract()
	wantStatus(t, "the same rule again", err, 409)
	rule.EtherType = rules.EtherType6
	_, err = rules.Create(ctx, n, rule).Extract()
	wantStatus(t, "an IPv4 prefix with ethertype IPv6", err, 400)
	if _, err := attributestags.ReplaceAll(ctx, n, "security-groups", g.ID, attributestags.ReplaceAllOpts{Tags: []string{"a", "b"}}).Extract(); err != nil {
		t.Fatal(err)
	}
	pages, err := groups.List(n, groups.ListOpts{Tags: "a,b"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if found, _ := groups.ExtractGroups(pages); len(found) != 1 || found[0].ID != g.ID {
		t.Errorf("list tags=a,b: %+v, want the group", found)
	}

	_, err = servers.Create(ctx, compute, servers.CreateOpts{Name: "x", FlavorRef: "1", ImageRef: c.Options().Images[0].ID,
		Networks: []servers.Network{{UUID: c.Options().Network.ID}}, SecurityGroups: []string{"no-such-group"}}, nil).Extract()
	wantStatus(t, "a server with an unknown security group", err, 400)
	s, err := servers.Create(ctx, compute, servers.CreateOpts{Name: "x", FlavorRef: "1", ImageRef: c.Options().Images[0].ID,
		Networks: []servers.Network{{UUID: c.Options().Network.ID}}, SecurityGroups: []string{g.ID}, ConfigDrive: gophercloud.Enabled}, nil).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, compute, s.ID); !got.ConfigDrive || len(got.SecurityGroups) != 0 {
		t.Errorf("building: config_drive %v, security_groups %v; want true and none (no port yet)", got.ConfigDrive, got.SecurityGroups)
	}
	if err := c.FinishBuild(s.ID); err != nil {
		t.Fatal(err)
	}
	if got := get(t, compute, s.ID).SecurityGroups; len(got) != 1 || got[0]["name"] != "proxy" {
		t.Errorf("built: security_groups %v, want the group by name", got)
	}
	wantStatus(t, "delete a group a server uses", groups.Delete(ctx, n, g.ID).ExtractErr(), 409)
	if err := c.RemoveServer(s.ID); err != nil {
		t.Fatal(err)
	}
	if err := groups.Delete(ctx, n, g.ID).ExtractErr(); err != nil {
		t.Fatalf("delete the group once the server is gone: %v", err)
	}
	wantStatus(t, "delete it again", groups.Delete(ctx, n, g.ID).ExtractErr(), 404)
}

// Server groups by microversion: "policies" before 2.64, "policy" from it
// (the other refused); a group hint must name a group; members are
// listed; a group with members deletes.
func TestServerGroupsByMicroversion(t *testing.T) {
	c, compute := start(t, nil)
	ctx := context.Background()
	g, err := servergroups.Create(ctx, compute, servergroups.CreateOpts{Name: "spread", Policies: []string{"soft-anti-affinity"}}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Policies) != 1 || g.Policies[0] != "soft-anti-affinity" {
		t.Errorf("at 2.52: policies %v", g.Policies)
	}
	v264 := *compute
	v264.Microversion = "2.64"
	_, err = servergroups.Create(ctx, &v264, servergroups.CreateOpts{Name: "old-field", Policies: []string{"anti-affinity"}}).Extract()
	wantStatus(t, "policies at 2.64", err, 400)
	if g2, err := servergroups.Create(ctx, &v264, servergroups.CreateOpts{Name: "new-field", Policy: "anti-affinity"}).Extract(); err != nil || g2.Policy == nil || *g2.Policy != "anti-affinity" {
		t.Errorf("policy at 2.64: %+v, %v", g2, err)
	}
	_, err = servergroups.Create(ctx, compute, servergroups.CreateOpts{Name: "affinity-v1", Policies: []string{"soft-affinity", "anti-affinity"}}).Extract()
	wantStatus(t, "two policies", err, 400)

	opts := servers.CreateOpts{Name: "x", FlavorRef: "1", ImageRef: c.Options().Images[0].ID, Networks: []servers.Network{{UUID: c.Options().Network.ID}}}
	_, err = servers.Create(ctx, compute, opts, servers.SchedulerHintOpts{Group: "9b7c1c42-5c0e-4d0b-a0f6-46a4b8a5e0f3"}).Extract()
	wantStatus(t, "a hint naming no group", err, 400)
	s, err := servers.Create(ctx, compute, opts, servers.SchedulerHintOpts{Group: g.ID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	got, err := servergroups.Get(ctx, compute, g.ID).Extract()
	if err != nil || len(got.Members) != 1 || got.Members[0] != s.ID {
		t.Errorf("members %+v, %v; want the server", got, err)
	}
	if err := servergroups.Delete(ctx, compute, g.ID).ExtractErr(); err != nil {
		t.Errorf("delete a group with a member: %v", err)
	}
	wantStatus(t, "get it after", servergroups.Get(ctx, compute, g.ID).Err, 404)
}
