package openstack

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servergroups"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// TestIntegrationOptions creates one server with every option on against
// the cloud of the OPENSTACK_TEST_* variables and reads back what the
// real services made of it: Nova's config_drive, the server's security
// group, Neutron's rules, the server group and its member; then Delete
// removes the server group. Skipped without the variables.
func TestIntegrationOptions(t *testing.T) {
	cfg := integrationConfig(t)
	region := cfg.Regions["test"]
	// The managed group alone: the test reads that the port carries it.
	region.SecurityGroups = nil
	region.ConfigDrive, region.ServerGroupPolicy = true, policySoftAntiAffinity
	region.ManagedSecurityGroup = &ManagedSecurityGroup{AllowedClients: []string{"10.244.0.0/16", "fd00:10::/64"}}
	cfg.Regions["test"] = region
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	suffix := time.Now().Unix() % 1000000
	req := contract.CreateRequest{
		Name: fmt.Sprintf("osfeat-it-%d", suffix), UID: fmt.Sprintf("0e9d6c1a-7f3b-4d2e-9a5c-osfeat%06d", suffix), Owner: "osfeat-test", Port: 3128,
		Placement: contract.Placement{Region: "test", Zone: "test", MachineType: "small", Image: "proxy"},
		CloudInit: []byte("#cloud-config\n"),
	}
	inst, err := p.Create(ctx, req)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer func() { _ = p.Delete(context.Background(), inst.ProviderID) }()
	_, id, _ := ids.Parse(inst.ProviderID)
	c, err := p.session(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	s, err := servers.Get(ctx, c.compute, id).Extract()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server %s: status %s, config_drive %v, security_groups %v, metadata %v", s.ID, s.Status, s.ConfigDrive, s.SecurityGroups, s.Metadata)
	if !s.ConfigDrive {
		t.Errorf("config_drive %v, want true", s.ConfigDrive)
	}
	pages, err := groups.List(c.network, groups.ListOpts{Name: managedGroupName}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sgs, _ := groups.ExtractGroups(pages)
	for _, g := range sgs {
		var ingress []string
		for _, r := range g.Rules {
			if r.Direction == "ingress" {
				ingress = append(ingress, fmt.Sprintf("%s %s %d-%d %s", r.EtherType, r.Protocol, r.PortRangeMin, r.PortRangeMax, r.RemoteIPPrefix))
			}
		}
		t.Logf("security group %s %q tags %v ingress %v", g.ID, g.Name, g.Tags, ingress)
	}
	if len(sgs) != 1 || !containsAll(sgs[0].Tags, []string{tagManaged, managedGroupName}) {
		t.Errorf("managed security groups %d, want 1 with the marks", len(sgs))
	}
	gid := s.Metadata[metaServerGroup]
	g, err := servergroups.Get(ctx, c.compute, gid).Extract()
	if err != nil {
		t.Fatalf("server group %q of the metadata: %v", gid, err)
	}
	t.Logf("server group %s %q policies %v members %v", g.ID, g.Name, g.Policies, g.Members)
	if !slices.Contains(g.Members, id) {
		t.Errorf("server group members %v lack the server", g.Members)
	}
	// Once built, the port Nova made carries the managed group.
	for ctx.Err() == nil {
		got, err := p.Get(ctx, inst.ProviderID)
		if err != nil || got.State != contract.StateProvisioning {
			t.Logf("after the build: %+v, %v", got, err)
			break
		}
		time.Sleep(2 * time.Second)
	}
	pp, err := ports.List(c.network, ports.ListOpts{DeviceID: id}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pl, _ := ports.ExtractPorts(pp)
	for _, port := range pl {
		t.Logf("port %s: status %s, security groups %v", port.ID, port.Status, port.SecurityGroups)
	}
	if len(pl) != 1 || len(sgs) != 1 || !slices.Equal(pl[0].SecurityGroups, []string{sgs[0].ID}) {
		t.Errorf("the server's ports %d, want 1 with only the managed group", len(pl))
	}
	if err := p.Delete(ctx, inst.ProviderID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := servergroups.Get(ctx, c.compute, gid).Extract(); !isStatus(err, 404) {
		t.Errorf("server group after Delete: %v, want 404", err)
	}
	for {
		if _, err := p.Get(ctx, inst.ProviderID); contract.ClassOf(err) == contract.ClassNotFound {
			break
		} else if ctx.Err() != nil {
			t.Fatalf("the server is not gone: %v", err)
		}
		time.Sleep(2 * time.Second)
	}
	// Delete leaves the region's group; the test removes it unless
	// another server still uses it (409).
	for _, sg := range sgs {
		if err := groups.Delete(ctx, c.network, sg.ID).ExtractErr(); err != nil {
			t.Logf("delete the region's security group: %v", err)
		}
	}
}
