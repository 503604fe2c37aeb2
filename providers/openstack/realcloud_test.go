package openstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/quotasets"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/projects"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/roles"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/users"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

// The real-cloud tests run against OpenStack's own services (Keystone,
// Nova with its FakeDriver, Glance, Neutron, Placement), the lane
// hack/openstack/ brings up (make test-integration-openstack-local). The
// variables are the ones TestIntegration reads, plus the admin cloud of
// the same clouds.yaml the control uses for what only an operator of the
// cloud can do.

// realEnv reads the lane's variables or skips the test naming them.
func realEnv(t *testing.T) map[string]string {
	t.Helper()
	vars := contracttest.RequireEnv(t, "real OpenStack cloud", "OPENSTACK_TEST_", []string{"CLOUDS_FILE", "REGION", "ZONE", "NETWORK", "IMAGE"},
		"OPENSTACK_TEST_CA_FILE")
	admin := contracttest.RequireEnv(t, "real OpenStack cloud", "OPENSTACK_", []string{"ADMIN_CLOUD"})
	vars["ADMIN_CLOUD"] = admin["ADMIN_CLOUD"]
	vars["CA_FILE"] = os.Getenv("OPENSTACK_TEST_CA_FILE")
	return vars
}

// laneCallTimeout is the provider's call timeout on the lane:
// OPENSTACK_TEST_CALL_TIMEOUT (a Go duration), or the provider's default,
// 30 s. At 15 s a GetServer outlasted it in three CI runs in a row: the
// lane runs in the background while the e2e lane's QEMU VMs and the other
// tests take the same two CPUs, and Nova's API then answers a GET in more
// than 15 s (docs/testing.md, "OpenStack's own services").
func laneCallTimeout(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("OPENSTACK_TEST_CALL_TIMEOUT")
	if v == "" {
		return 30 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("OPENSTACK_TEST_CALL_TIMEOUT=%q: want a positive Go duration such as 30s", v)
	}
	return d
}

// admin is the cloud's admin: service clients logged in as the admin
// cloud of the lane's clouds.yaml.
type admin struct {
	identity, compute, network, image *gophercloud.ServiceClient
	authURL                           string
	http                              http.Client
}

func newAdmin(t *testing.T, vars map[string]string) *admin {
	t.Helper()
	ctx := context.Background()
	content, err := os.ReadFile(vars["CLOUDS_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	ao, err := parseClouds(string(content), vars["ADMIN_CLOUD"], vars["CLOUDS_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	// The provider's own client (TLS as configured) serves the admin too.
	hc, err := (&Provider{cfg: Config{CAFile: vars["CA_FILE"], CallTimeout: contract.Duration{Duration: time.Minute}}}).httpClient()
	if err != nil {
		t.Fatal(err)
	}
	pc, err := openstack.NewClient(ao.IdentityEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	pc.HTTPClient = hc
	ao.AllowReauth = true
	if err := openstack.Authenticate(ctx, pc, ao); err != nil {
		t.Fatalf("admin login (cloud %s of %s): %v", vars["ADMIN_CLOUD"], vars["CLOUDS_FILE"], err)
	}
	eo := gophercloud.EndpointOpts{Region: vars["REGION"], Availability: gophercloud.AvailabilityPublic}
	a := &admin{authURL: ao.IdentityEndpoint, http: hc}
	if a.identity, err = openstack.NewIdentityV3(pc, eo); err != nil {
		t.Fatal(err)
	}
	if a.compute, err = openstack.NewComputeV2(pc, eo); err != nil {
		t.Fatal(err)
	}
	// 2.3 shows OS-EXT-SRV-ATTR:user_data to an admin; 2.52 is the
	// provider's, which has it too.
	a.compute.Microversion = computeMicroversion
	if a.network, err = openstack.NewNetworkV2(pc, eo); err != nil {
		t.Fatal(err)
	}
	if a.image, err = openstack.NewImageV2(pc, eo); err != nil {
		t.Fatal(err)
	}
	return a
}

// tenant is a project of the test's own, made by the admin for one test
// and removed after it: a member-only user, a private flavor, a network
// of its own. Its own project keeps the harness's inventory, quotas and
// disabled user away from everyone else on the shared cloud. The network
// is the project's (not the lane's, shared to it) because Neutron lets
// only a network's owner choose a port's fixed IP
// (neutron/conf/policies/port.py, create_port:fixed_ips:ip_address), which
// a static address needs.
type tenant struct {
	admin                         *admin
	name, projectID, userID       string
	password                      string
	memberRoleID                  string
	flavorID, flavorName, network string
	subnet                        string
	// router routes the network to the external network (routeTo), for
	// floating IPs; "" when the tenant has none.
	router string
	cfg    Config
	dir    string
	// static is a static network of the tenant's subnet, for the
	// harness's StaticAddressDelivered.
	static *contract.StaticNetwork
}

// The tenant's subnet: no DHCP (the guest would read its address from
// network_data.json; the lane runs no DHCP agent anyway), a gateway and a
// resolver, so the provider's check of both meets real values.
const (
	tenantCIDR    = "192.168.78.0/24"
	tenantGateway = "192.168.78.1"
	tenantDNS     = "192.168.78.53"
	// tenantStatic is the harness's first static address; the rules take
	// it and the ones above it. They are outside the subnet's allocation
	// pool (tenantPool), as docs/openstack-provider.md asks of an
	// AddressPool: Neutron hands any pool address to a server booted
	// without a port (a CI run's CreateResumesAfterFailure met 409
	// IpAddressAlreadyAllocated for .205 and .206, held by ports Nova had
	// made for other rules' servers).
	tenantStatic = "192.168.78.200/24"
)

// tenantPool is the subnet's allocation pool: below the static range.
var tenantPool = []subnets.AllocationPool{{Start: "192.168.78.2", End: "192.168.78.199"}}

func randomName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// newTenant makes the project, user, flavor and network access, and
// registers their removal.
func newTenant(t *testing.T, vars map[string]string, a *admin) *tenant {
	t.Helper()
	ctx := context.Background()
	tn := &tenant{admin: a, name: randomName("osreal"), password: randomName("osreal-secret"), dir: t.TempDir()}
	t.Cleanup(func() { tn.remove(t) })

	p, err := projects.Create(ctx, a.identity, projects.CreateOpts{Name: tn.name, DomainID: "default", Description: "egress-proxies osreal test project"}).Extract()
	if err != nil {
		t.Fatalf("create project: %v", err)
	}
	tn.projectID = p.ID
	u, err := users.Create(ctx, a.identity, users.CreateOpts{Name: tn.name, DomainID: "default", Password: tn.password, DefaultProjectID: p.ID}).Extract()
	if err != nil {
		t.Fatalf("create user: %v", err)
	}
	tn.userID = u.ID
	pages, err := roles.List(a.identity, roles.ListOpts{Name: "member"}).AllPages(ctx)
	if err != nil {
		t.Fatalf("find role member: %v", err)
	}
	rs, err := roles.ExtractRoles(pages)
	if err != nil || len(rs) != 1 {
		t.Fatalf("find role member: %v, %d found", err, len(rs))
	}
	tn.memberRoleID = rs[0].ID
	tn.grant(t, true)

	// Room for the harness: CreateResumesAfterFailure keeps a server for
	// every cut until the rule ends (about ten), and deleted servers count
	// until they are gone.
	many := 40
	if _, err := quotasets.Update(ctx, a.compute, p.ID, quotasets.UpdateOpts{Instances: &many, Cores: &many}).Extract(); err != nil {
		t.Fatalf("quota of %s: %v", tn.name, err)
	}

	tn.flavorName = tn.name
	tn.flavorID = newUUID()
	tn.makeFlavor(t)

	// The project's own network, made by the admin as the lane makes
	// its own (hack/openstack/bootstrap.py): a tenant network of the
	// lane's type, bound by the same agent.
	net, err := networks.Create(ctx, a.network, networks.CreateOpts{Name: tn.name, ProjectID: p.ID}).Extract()
	if err != nil {
		t.Fatalf("network of %s: %v", tn.name, err)
	}
	tn.network = net.ID
	dhcp, gw := false, tenantGateway
	sub, err := subnets.Create(ctx, a.network, subnets.CreateOpts{
		NetworkID: net.ID, Name: tn.name + "-v4", ProjectID: p.ID, IPVersion: gophercloud.IPv4, CIDR: tenantCIDR,
		GatewayIP: &gw, EnableDHCP: &dhcp, DNSNameservers: []string{tenantDNS}, AllocationPools: tenantPool,
	}).Extract()
	if err != nil {
		t.Fatalf("subnet of %s: %v", tn.name, err)
	}
	tn.subnet = sub.ID
	tn.static = &contract.StaticNetwork{
		Address: netip.MustParsePrefix(tenantStatic), Gateway: netip.MustParseAddr(tenantGateway),
		DNS: []netip.Addr{netip.MustParseAddr(tenantDNS)},
	}

	clouds := fmt.Sprintf("clouds:\n  openstack:\n    auth:\n      auth_url: %s\n      username: %s\n      password: %s\n      project_name: %s\n      user_domain_name: Default\n      project_domain_name: Default\n",
		a.authURL, tn.name, tn.password, tn.name)
	if err := os.WriteFile(filepath.Join(tn.dir, "clouds.yaml"), []byte(clouds), 0o600); err != nil {
		t.Fatal(err)
	}
	tn.cfg = Config{
		CloudsFile: filepath.Join(tn.dir, "clouds.yaml"), CAFile: vars["CA_FILE"],
		Regions: map[string]Region{"one": {Name: vars["REGION"], Network: tn.network,
			Zones: map[string]string{"zone": vars["ZONE"]}}},
		MachineTypes: map[string]string{"small": tn.flavorName},
		Images:       map[string]string{"proxy": vars["IMAGE"]},
		// The harness's stall rules wait this long per call.
		CallTimeout: contract.Duration{Duration: laneCallTimeout(t)},
	}
	return tn
}

// grant gives the user the member role on the project, or takes it away.
func (tn *tenant) grant(t *testing.T, on bool) {
	t.Helper()
	ctx := context.Background()
	var err error
	if on {
		err = roles.Assign(ctx, tn.admin.identity, tn.memberRoleID, roles.AssignOpts{UserID: tn.userID, ProjectID: tn.projectID}).ExtractErr()
	} else {
		err = roles.Unassign(ctx, tn.admin.identity, tn.memberRoleID, roles.UnassignOpts{UserID: tn.userID, ProjectID: tn.projectID}).ExtractErr()
	}
	if err != nil && !gophercloud.ResponseCodeIs(err, 404) {
		t.Errorf("role member on %s (assign %v): %v", tn.name, on, err)
	}
}

// makeFlavor makes the tenant's private flavor under its fixed ID, the
// first time and after a fault deleted it.
func (tn *tenant) makeFlavor(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	public := false
	disk := 1
	if _, err := flavors.Create(ctx, tn.admin.compute, flavors.CreateOpts{
		ID: tn.flavorID, Name: tn.flavorName, VCPUs: 1, RAM: 256, Disk: &disk, IsPublic: &public,
	}).Extract(); err != nil {
		t.Errorf("create flavor %s: %v", tn.flavorName, err)
		return
	}
	if _, err := flavors.AddAccess(ctx, tn.admin.compute, tn.flavorID, flavors.AddAccessOpts{Tenant: tn.projectID}).Extract(); err != nil {
		t.Errorf("flavor %s access for %s: %v", tn.flavorName, tn.name, err)
	}
}

// remove deletes what the tenant still holds: its servers (a failed rule
// may leave some), the ports left on its network, the network, flavor,
// user and project.
func (tn *tenant) remove(t *testing.T) {
	ctx := context.Background()
	a := tn.admin
	if tn.projectID != "" {
		if pages, err := servers.List(a.compute, servers.ListOpts{AllTenants: true, TenantID: tn.projectID}).AllPages(ctx); err == nil {
			left, _ := servers.ExtractServers(pages)
			for _, s := range left {
				t.Logf("removing server %s %s left in %s", s.ID, s.Name, tn.name)
				_ = servers.ForceDelete(ctx, a.compute, s.ID).ExtractErr()
			}
			waitNoServers(ctx, a, tn.projectID)
		}
	}
	tn.unroute(t)
	if tn.network != "" {
		if pages, err := ports.List(a.network, ports.ListOpts{NetworkID: tn.network}).AllPages(ctx); err == nil {
			left, _ := ports.ExtractPorts(pages)
			for _, p := range left {
				if !strings.HasPrefix(p.DeviceOwner, "network:") {
					t.Logf("removing port %s %s %v left in %s", p.ID, p.Name, p.FixedIPs, tn.name)
				}
				_ = ports.Delete(ctx, a.network, p.ID).ExtractErr()
			}
		}
		if err := networks.Delete(ctx, a.network, tn.network).ExtractErr(); err != nil {
			t.Logf("delete network of %s: %v", tn.name, err)
		}
	}
	if tn.flavorID != "" {
		_ = flavors.Delete(ctx, a.compute, tn.flavorID).ExtractErr()
	}
	if tn.userID != "" {
		_ = users.Delete(ctx, a.identity, tn.userID).ExtractErr()
	}
	if tn.projectID != "" {
		_ = projects.Delete(ctx, a.identity, tn.projectID).ExtractErr()
	}
}

// waitNoServers waits up to a minute for the project's servers to be gone,
// so their ports are released before the project is.
func waitNoServers(ctx context.Context, a *admin, projectID string) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		pages, err := servers.List(a.compute, servers.ListOpts{AllTenants: true, TenantID: projectID}).AllPages(ctx)
		if err != nil {
			return
		}
		if left, _ := servers.ExtractServers(pages); len(left) == 0 {
			return
		}
	}
}

func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// realCloud is one real-cloud test's world: the admin, the tenant, the
// wire every provider's calls go through, and the control over them.
type realCloud struct {
	admin  *admin
	tenant *tenant
	wire   *wire
}

func startRealCloud(t *testing.T) *realCloud {
	t.Helper()
	vars := realEnv(t)
	a := newAdmin(t, vars)
	return &realCloud{admin: a, tenant: newTenant(t, vars, a), wire: newWire()}
}

// provider is a provider for the tenant whose calls go through the wire.
func (rc *realCloud) provider(t *testing.T) *Provider {
	t.Helper()
	p, err := New(rc.tenant.cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.wrapTransport = rc.wire.wrap
	return p
}

// TestContractRealCloud runs the conformance harness against the real
// services. The control (realControl) plays what only the cloud's
// operator can do through the admin API, and network faults through the
// wire between the provider and the services; the capabilities it leaves
// out are listed with their reasons on realControl.
func TestContractRealCloud(t *testing.T) {
	rc := startRealCloud(t)
	ctl := &realControl{rc: rc, t: t}
	ghosts := watchGhosts(t, rc)
	contracttest.Run(t, contracttest.Config{
		NewProvider: func(t *testing.T) contract.Provider { return ghosts.provider(t, rc) },
		Backend:     ctl,
		Placement:   contract.Placement{Region: "one", Zone: "zone", MachineType: "small", Image: "proxy"},
		// The lane has one region and one availability zone, so
		// ListByTagCoversEveryLocation is skipped here (osfake's two
		// regions run it).
		MaxCloudInit: MaxCloudInit,
		Credential:   rc.tenant.password,
		// Neutron gives the address when the port is made
		// (ip-source: assigned-at-create); no guest reports one.
		IPAssignedAtCreate: true,
		// An address of the tenant's own subnet (the member may choose a
		// fixed IP only on its project's network).
		StaticNetwork:      rc.tenant.static,
		NetworkFromBackend: true,
		CallBudget:         rc.tenant.cfg.CallTimeout.Duration,
		WaitTimeout:        2 * time.Minute,
		NamePrefix:         "osreal",
	})
}

// httpStatus is the status of an HTTP answer, for messages.
func httpStatus(code int) string { return fmt.Sprintf("%d %s", code, http.StatusText(code)) }
