package openstack

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/providers/openstack/osfake"
)

// withOptions turns every option on in every region of the cloud's config.
func (c *cloud) withOptions() {
	for k, r := range c.cfg.Regions {
		r.ConfigDrive = true
		r.ManagedSecurityGroup = &ManagedSecurityGroup{AllowedClients: []string{"10.244.0.0/16", "fd00:10::/64"}}
		r.ServerGroupPolicy = policySoftAntiAffinity
		c.cfg.Regions[k] = r
	}
}

func TestOptionsValidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		adjust func(*Region)
		want   string // "" is valid
	}{
		{"all on", func(r *Region) {
			r.ConfigDrive, r.ServerGroupPolicy = true, "anti-affinity"
			r.ManagedSecurityGroup = &ManagedSecurityGroup{AllowedClients: []string{"10.0.0.0/8", "2001:db8::/32"}}
		}, ""},
		{"soft anti-affinity", func(r *Region) { r.ServerGroupPolicy = "soft-anti-affinity" }, ""},
		{"floating IPs", func(r *Region) { r.FloatingIPs = &FloatingIPs{Network: "5b3c3a52-4c5e-4c44-9a5c-7b0e2d6f9a10"} }, ""},
		{"floating IPs by name", func(r *Region) { r.FloatingIPs = &FloatingIPs{Network: "public"} },
			`regions["one"].floatingIPs.network "public": want the external network's ID`},
		{"affinity", func(r *Region) { r.ServerGroupPolicy = "affinity" }, `regions["one"].serverGroupPolicy "affinity": want anti-affinity or soft-anti-affinity`},
		{"no clients", func(r *Region) { r.ManagedSecurityGroup = &ManagedSecurityGroup{} }, `regions["one"].managedSecurityGroup.allowedClients: at least one network is required`},
		{"not a CIDR", func(r *Region) { r.ManagedSecurityGroup = &ManagedSecurityGroup{AllowedClients: []string{"10.0.0.1"}} },
			`regions["one"].managedSecurityGroup.allowedClients[0] "10.0.0.1": want a CIDR such as 10.0.0.0/8`},
		{"host bits", func(r *Region) {
			r.ManagedSecurityGroup = &ManagedSecurityGroup{AllowedClients: []string{"10.0.0.0/8", "10.1.2.3/16"}}
		}, `regions["one"].managedSecurityGroup.allowedClients[1] "10.1.2.3/16": want the network's address, 10.1.0.0/16`},
		{"the world", func(r *Region) { r.ManagedSecurityGroup = &ManagedSecurityGroup{AllowedClients: []string{"0.0.0.0/0"}} },
			`regions["one"].managedSecurityGroup.allowedClients[0] "0.0.0.0/0": an IPv4 network must be /8 or longer`},
		{"the IPv6 world", func(r *Region) { r.ManagedSecurityGroup = &ManagedSecurityGroup{AllowedClients: []string{"::/0"}} },
			`regions["one"].managedSecurityGroup.allowedClients[0] "::/0": an IPv4 network must be /8 or longer and an IPv6 one /7 or longer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig()
			r := cfg.Regions["one"]
			tc.adjust(&r)
			cfg.Regions["one"] = r
			err := cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func validConfig() Config {
	return Config{
		CloudsFile: "/etc/egress/clouds.yaml",
		Regions: map[string]Region{
			"one": {Name: "RegionOne", Network: "8b2a3c4d-1e2f-4a5b-9c8d-7e6f5a4b3c2d", Zones: map[string]string{"a": "nova"}},
		},
		MachineTypes: map[string]string{"small": "m1.small"},
		Images:       map[string]string{"debian": "debian-12"},
	}
}

// With every option on, the server gets a config drive, the Owner's
// managed security group (by ID) and its Proxy's server group as the
// scheduler hint; the group holds one ingress rule per allowed network
// for the Proxy's port, with the ethertype of the network's family.
func TestCreateWithOptions(t *testing.T) {
	c := startCloud(t)
	c.withOptions()
	p := c.provider(t)
	ctx := context.Background()
	req := request("proxy-options")
	if _, err := p.Create(ctx, req); err != nil {
		t.Fatal(err)
	}
	sgs := c.fake.SecurityGroups()
	if len(sgs) != 1 {
		t.Fatalf("security groups %+v, want the one managed group", sgs)
	}
	sg := sgs[0]
	if sg.Name != "egressproxies-proxy-ports" || !slices.Equal(sg.Tags, []string{"egressproxies-managed", "egressproxies-proxy-ports"}) {
		t.Errorf("managed group %+v: want its name and the marks", sg)
	}
	wantRules := []string{"IPv4 tcp 3128-3128 10.244.0.0/16", "IPv6 tcp 3128-3128 fd00:10::/64"}
	if !slices.Equal(sg.Ingress, wantRules) {
		t.Errorf("ingress rules %v, want %v", sg.Ingress, wantRules)
	}
	groups := c.fake.ServerGroups()
	if len(groups) != 1 || groups[0].Name != "egressproxies-uid-"+req.UID || groups[0].Policy != "soft-anti-affinity" {
		t.Fatalf("server groups %+v, want the Proxy's soft-anti-affinity group", groups)
	}
	s := named(c, req.Name)[0]
	if !s.ConfigDrive || s.Group != groups[0].ID || !slices.Equal(s.SecurityGroups, []string{sg.ID}) {
		t.Errorf("server: config drive %v, group %q, security groups %v; want true, %s, [%s]", s.ConfigDrive, s.Group, s.SecurityGroups, groups[0].ID, sg.ID)
	}

	// A second Proxy, of another Owner, on another port shares the group
	// and opens its port; its own server group is its own.
	other := request("proxy-options-2")
	other.UID, other.Port, other.Owner = "7a2c1d3e-4b5f-4a6b-8c7d-9e0f1a2b3c4d", 8080, "other-install"
	if _, err := c.provider(t).Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	if sgs := c.fake.SecurityGroups(); len(sgs) != 1 || len(sgs[0].Ingress) != 4 {
		t.Errorf("after a second Proxy on port 8080: %+v, want one group with 4 ingress rules", sgs)
	}
	if n := len(c.fake.ServerGroups()); n != 2 {
		t.Errorf("%d server groups, want one per Proxy", n)
	}
}

// Delete deletes the Proxy's server group (named in the server's
// metadata) before the server, so a Delete cut after it resumes; the
// shared security group stays.
func TestDeleteRemovesTheServerGroup(t *testing.T) {
	c := startCloud(t)
	c.withOptions()
	p := c.provider(t)
	ctx := context.Background()
	inst, err := p.Create(ctx, request("proxy-sg-delete"))
	if err != nil {
		t.Fatal(err)
	}
	// A server with no task is deleted by forceDelete (deleteServer).
	c.fake.FailNext("POST", `/servers/[^/]+/action$`, 503, osfake.UnavailableBody)
	if err := p.Delete(ctx, inst.ProviderID); err == nil {
		t.Fatal("Delete with Nova unavailable succeeded")
	}
	if err := c.provider(t).Delete(ctx, inst.ProviderID); err != nil {
		t.Fatalf("Delete resumed: %v", err)
	}
	if g := c.fake.ServerGroups(); len(g) != 0 {
		t.Errorf("server groups left after Delete: %+v", g)
	}
	if len(c.fake.SecurityGroups()) != 1 {
		t.Error("the shared security group was deleted with one Proxy")
	}
}

// The replicas of one Proxy share its server group, so deleting one
// replica (a scale-down, a replacement) keeps the group for the others:
// Nova deletes a group whatever its members (server_groups.py delete), and
// the survivors and the next replica would lose their anti-affinity. The
// group goes with the Proxy's last server; a replica whose delete is under
// way does not hold it.
func TestDeletingOneReplicaKeepsTheServerGroup(t *testing.T) {
	c := startCloud(t, func(o *osfake.Options) { o.DeleteDelay = time.Hour })
	c.withOptions()
	p := c.provider(t)
	ctx := context.Background()
	var replicas []contract.Instance
	for _, name := range []string{"proxy-group-0", "proxy-group-1", "proxy-group-2"} {
		inst, err := p.Create(ctx, request(name))
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, inst)
	}
	groups := c.fake.ServerGroups()
	if len(groups) != 1 || len(groups[0].Members) != 3 {
		t.Fatalf("server groups %+v; want one with the three replicas", groups)
	}
	for i, inst := range replicas {
		if err := p.Delete(ctx, inst.ProviderID); err != nil {
			t.Fatal(err)
		}
		left := c.fake.ServerGroups()
		if last := i == len(replicas)-1; last != (len(left) == 0) {
			t.Errorf("after deleting replica %d of %d (its delete under way for an hour): server groups %+v", i, len(replicas), left)
		}
	}
}

// Nova lists server groups a page at a time ([api]max_limit, 1000 by
// default; common.py limited, no next link): a Proxy's group past the
// first page must still be found, or its next replica gets a group of its
// own and the two may share a host.
func TestServerGroupFoundPastTheFirstPage(t *testing.T) {
	c := startCloud(t, func(o *osfake.Options) { o.MaxLimit = 2 })
	c.withOptions()
	for i := range 3 {
		c.fake.AddServerGroup(fmt.Sprintf("another-%d", i), "anti-affinity")
	}
	p := c.provider(t)
	ctx := context.Background()
	for _, name := range []string{"proxy-paged-0", "proxy-paged-1"} {
		if _, err := p.Create(ctx, request(name)); err != nil {
			t.Fatal(err)
		}
	}
	a, b := named(c, "proxy-paged-0"), named(c, "proxy-paged-1")
	if groups := c.fake.ServerGroups(); len(groups) != 4 || len(a) != 1 || len(b) != 1 || a[0].Group != b[0].Group {
		t.Errorf("server groups %+v; want the three others and one the two replicas share", groups)
	}
}

// A replica whose build fails is deleted by its Create, and its group
// kept for the replica already in it.
func TestFailedReplicaKeepsTheServerGroup(t *testing.T) {
	c := startCloud(t)
	c.withOptions()
	p := c.provider(t)
	ctx := context.Background()
	first, err := p.Create(ctx, request("proxy-group-ok"))
	if err != nil {
		t.Fatal(err)
	}
	c.fake.FailNextBuild("Build of instance aborted: Failure prepping block device.")
	if _, err := p.Create(ctx, request("proxy-group-failed")); err == nil {
		t.Fatal("Create of a replica whose build fails succeeded")
	}
	_, id, _ := ids.Parse(first.ProviderID)
	if groups := c.fake.ServerGroups(); len(groups) != 1 || !slices.Equal(groups[0].Members, []string{id}) {
		t.Errorf("server groups after a replica's failed build: %+v; want the group with %s", groups, id)
	}
}

// A create Nova refuses (over the instance quota) leaves no server group
// behind (contract §4.10); the next Create makes a fresh one.
func TestRefusedCreateRemovesTheServerGroup(t *testing.T) {
	c := startCloud(t)
	c.withOptions()
	c.fake.FailNext("POST", `/servers$`, 403, osfake.QuotaBody)
	_, err := c.provider(t).Create(context.Background(), request("proxy-refused"))
	if contract.ClassOf(err) != contract.ClassQuota {
		t.Fatalf("Create over the quota = %v, want ErrQuota", err)
	}
	if g := c.fake.ServerGroups(); len(g) != 0 {
		t.Errorf("server groups left by a refused create: %+v", g)
	}
}

// A managed group cut between its create and its tags (Zed takes no tags
// on create) is tagged and used by the next Create, not duplicated; a
// group of the same name someone else made (another description) is
// never used.
func TestManagedGroupResumesAndNeverAdoptsAForeignOne(t *testing.T) {
	c := startCloud(t)
	c.withOptions()
	ctx := context.Background()
	req := request("proxy-sg-cut")
	p := c.provider(t)
	c.fake.DropNextResponse("POST", `/security-groups$`)
	if _, err := p.Create(ctx, req); err == nil {
		t.Fatal("Create with the group's create cut succeeded")
	}
	if sgs := c.fake.SecurityGroups(); len(sgs) != 1 || len(sgs[0].Tags) != 0 {
		t.Fatalf("after the cut: %+v, want one untagged group", sgs)
	}
	if _, err := p.Create(ctx, req); err != nil {
		t.Fatal(err)
	}
	if sgs := c.fake.SecurityGroups(); len(sgs) != 1 || len(sgs[0].Tags) != 2 {
		t.Fatalf("after the retry: %+v, want the one group, tagged", sgs)
	}

	foreign := startCloud(t)
	foreign.withOptions()
	foreign.fake.AddSecurityGroup("egressproxies-proxy-ports", "a person's group")
	if _, err := foreign.provider(t).Create(ctx, request("proxy-foreign")); err != nil {
		t.Fatal(err)
	}
	var mine int
	for _, g := range foreign.fake.SecurityGroups() {
		if len(g.Tags) == 2 {
			mine++
		}
		if g.Description == "a person's group" && (len(g.Tags) != 0 || len(g.Ingress) != 0) {
			t.Errorf("a person's group was changed: %+v", g)
		}
	}
	if mine != 1 {
		t.Errorf("%d managed groups, want 1 beside the person's", mine)
	}
}

// The Checker reads the options' needs: Neutron for a managed group, and
// the server group quota, used up when every group is taken.
func TestCheckerReportsTheOptions(t *testing.T) {
	c := startCloud(t)
	c.withOptions()
	c.fake.SetQuota(osfake.Quota{ServerGroups: 1})
	p := c.provider(t)
	ctx := context.Background()
	reasons := func() map[string]string {
		out := map[string]string{}
		for _, r := range p.Check(ctx) {
			out[r.Target] = r.Reason + " " + r.Message
		}
		return out
	}
	if got := reasons(); !strings.HasPrefix(got["region/one/securityGroups"], contract.ReasonOK) || !strings.HasPrefix(got["region/one/serverGroups"], contract.ReasonOK) {
		t.Errorf("Check before any Proxy: %v", got)
	}
	if _, err := p.Create(ctx, request("proxy-check")); err != nil {
		t.Fatal(err)
	}
	if got := reasons()["region/one/serverGroups"]; !strings.HasPrefix(got, contract.ReasonQuotaExceeded) || !strings.Contains(got, "1 of 1") {
		t.Errorf("Check with the server group quota used up: %q, want %s naming 1 of 1", got, contract.ReasonQuotaExceeded)
	}
}

// A server whose build failed and which the provider deletes itself (Get's
// capacity fault; Create's any fault) takes its server group with it: Delete,
// which finds the group through the server, would find no server, and a
// Proxy deleted then would leave the group behind. The real cloud showed
// it: a build that failed (PortBindingFailed) was deleted by Get, and the
// group outlived Delete.
func TestFailedBuildTakesItsServerGroup(t *testing.T) {
	c := startCloud(t, func(o *osfake.Options) { o.HoldBuilds = true })
	c.withOptions()
	p := c.provider(t)
	ctx := context.Background()
	c.fake.FailNextBuild(osfake.NoValidHost)
	inst, err := p.Create(ctx, request("proxy-failed-group"))
	if err != nil {
		t.Fatal(err)
	}
	_, id, _ := ids.Parse(inst.ProviderID)
	if err := c.fake.FinishBuild(id); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get(ctx, inst.ProviderID); contract.ClassOf(err) != contract.ClassQuota {
		t.Fatalf("Get of the failed build = %v, want ErrQuota", err)
	}
	if g := c.fake.ServerGroups(); len(g) != 0 {
		t.Errorf("server groups left after the provider deleted the failed server: %+v", g)
	}
	if err := p.Delete(ctx, inst.ProviderID); err != nil {
		t.Fatal(err)
	}
}
