package openstack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/providers/openstack/osfake"
)

// The fake's network (startCloud) has two subnets: 10.0.1.0/24 with
// DHCP, and 10.0.0.0/24 without, gateway 10.0.0.1, resolvers 10.0.0.2 and
// 10.0.0.3: the one static addresses come from.
var (
	staticSubnet = osfake.Subnet{CIDR: "10.0.0.0/24", GatewayIP: "10.0.0.1", DNS: []string{"10.0.0.2", "10.0.0.3"}}
	dhcpSubnet   = osfake.Subnet{CIDR: "10.0.1.0/24", GatewayIP: "10.0.1.1", EnableDHCP: true}
)

// testNetwork is a static network of the fake's static subnet.
func testNetwork(address string) *contract.StaticNetwork {
	return &contract.StaticNetwork{
		Address: netip.MustParsePrefix(address), Gateway: netip.MustParseAddr("10.0.0.1"),
		DNS: []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")},
	}
}

func staticRequest(name, address string) contract.CreateRequest {
	req := request(name)
	req.Network = testNetwork(address)
	return req
}

// portsNamed are the fake's ports of that name.
func portsNamed(c *cloud, name string) []osfake.Port {
	var out []osfake.Port
	for _, p := range c.fake.Ports() {
		if p.Name == name {
			out = append(out, p)
		}
	}
	return out
}

// A static address is a Neutron port with that fixed IP, marked with the
// Proxy's Owner and UID, that the server boots on; the guest is given the
// address, the subnet's gateway and resolvers (network_data.json), and
// Get reports exactly the address.
func TestStaticAddressIsAPortOfItsOwn(t *testing.T) {
	c := startCloud(t)
	ctx := context.Background()
	p := c.provider(t)
	req := staticRequest("proxy-static", "10.0.0.200/24")
	inst, err := p.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	ports := portsNamed(c, req.Name)
	if len(ports) != 1 {
		t.Fatalf("Neutron holds %d ports named %s, want 1: %+v", len(ports), req.Name, c.fake.Ports())
	}
	port := ports[0]
	srv := named(c, req.Name)
	if len(srv) != 1 || !slices.Equal(srv[0].Ports, []string{port.ID}) || port.DeviceID != srv[0].ID {
		t.Fatalf("server %+v, port %+v: want the server booted on the port", srv, port)
	}
	if !slices.Equal(port.IPs, []string{"10.0.0.200"}) {
		t.Errorf("port's fixed IPs %v, want [10.0.0.200]", port.IPs)
	}
	for _, mark := range []string{contract.LabelManaged + "=" + req.Owner, contract.LabelUID + "=" + req.UID} {
		if !strings.Contains(port.Description, mark) {
			t.Errorf("port's description %q lacks %q", port.Description, mark)
		}
	}
	got, err := p.Get(ctx, inst.ProviderID)
	if err != nil || got.State != contract.StateRunning || got.IP != "10.0.0.200" {
		t.Fatalf("Get = %+v, %v; want Running at 10.0.0.200", got, err)
	}
	delivered, err := control{c}.DeliveredNetwork(ctx, inst.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	if want := *req.Network; delivered.Address != want.Address || delivered.Gateway != want.Gateway || !slices.Equal(delivered.DNS, want.DNS) {
		t.Errorf("the guest is given %+v, want %+v", delivered, want)
	}
}

// What Neutron's subnet gives the guest besides the address (the prefix
// length, the gateway, the resolvers) is the subnet's: a request that
// names other ones, or an address in no subnet of the network, is
// refused naming the field and value before any server or port is made.
func TestStaticAddressMustFitASubnet(t *testing.T) {
	c := startCloud(t)
	other := testNetwork("10.0.0.200/24")
	other.DNS = []netip.Addr{netip.MustParseAddr("10.0.0.9")}
	for _, tc := range []struct {
		name    string
		network *contract.StaticNetwork
		field   string
		value   string
	}{
		{"outside every subnet", &contract.StaticNetwork{Address: netip.MustParsePrefix("10.0.2.10/24"), Gateway: netip.MustParseAddr("10.0.2.1")}, "network.address", "10.0.2.10/24"},
		{"another prefix length", &contract.StaticNetwork{Address: netip.MustParsePrefix("10.0.0.100/25"), Gateway: netip.MustParseAddr("10.0.0.1")}, "network.address", "10.0.0.100/25"},
		{"another gateway", &contract.StaticNetwork{Address: netip.MustParsePrefix("10.0.0.200/24"), Gateway: netip.MustParseAddr("10.0.0.254")}, "network.gateway", "10.0.0.254"},
		{"other resolvers", other, "network.dns", "10.0.0.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := request("proxy-misfit")
			req.Network = tc.network
			_, err := c.provider(t).Create(context.Background(), req)
			if contract.ClassOf(err) != contract.ClassPermanent || err == nil || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.value) {
				t.Errorf("Create = %v, want ErrPermanent naming %s and %s", err, tc.field, tc.value)
			}
			if s, ps := named(c, req.Name), c.fake.Ports(); len(s) != 0 || len(ps) != 0 {
				t.Errorf("left servers %+v and ports %+v", s, ps)
			}
		})
	}
}

// Nova leaves a port it was given when it deletes the server, so Delete
// deletes it, and a Delete cut after it resumes at the server.
func TestDeleteRemovesThePort(t *testing.T) {
	c := startCloud(t)
	ctx := context.Background()
	p := c.provider(t)
	inst, err := p.Create(ctx, staticRequest("proxy-static-delete", "10.0.0.201/24"))
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
	waitGone(t, p, inst.ProviderID)
	if ps := c.fake.Ports(); len(ps) != 0 {
		t.Errorf("ports left after Delete: %+v", ps)
	}
}

// waitGone polls Get until ErrNotFound (the fake finishes a delete by the
// next request).
func waitGone(t *testing.T, p *Provider, providerID string) {
	t.Helper()
	for range 100 {
		if _, err := p.Get(context.Background(), providerID); contract.ClassOf(err) == contract.ClassNotFound {
			return
		}
	}
	t.Fatalf("%s is still there", providerID)
}

// A server create Nova refuses leaves no port behind (contract §4.10):
// nothing else would find it, and it holds the Proxy's address.
func TestRefusedCreateRemovesThePort(t *testing.T) {
	c := startCloud(t)
	c.fake.FailNext("POST", `/servers$`, 403, osfake.QuotaBody)
	_, err := c.provider(t).Create(context.Background(), staticRequest("proxy-static-refused", "10.0.0.202/24"))
	if contract.ClassOf(err) != contract.ClassQuota {
		t.Fatalf("Create over the quota = %v, want ErrQuota", err)
	}
	if ps := c.fake.Ports(); len(ps) != 0 {
		t.Errorf("ports left by a refused create: %+v", ps)
	}
}

// A port whose create answer was lost is found again by its name and
// marks: one port, one server on it.
func TestCreateResumesWithItsPort(t *testing.T) {
	c := startCloud(t)
	ctx := context.Background()
	req := staticRequest("proxy-static-resume", "10.0.0.203/24")
	c.fake.DropNextResponse("POST", `/ports$`)
	if _, err := c.provider(t).Create(ctx, req); contract.ClassOf(err) != contract.ClassTransient {
		t.Fatalf("Create with the port's answer lost = %v, want a transient error", err)
	}
	if _, err := c.provider(t).Create(ctx, req); err != nil {
		t.Fatalf("Create after the restart: %v", err)
	}
	ports, srv := portsNamed(c, req.Name), named(c, req.Name)
	if len(ports) != 1 || len(srv) != 1 || !slices.Equal(srv[0].Ports, []string{ports[0].ID}) {
		t.Errorf("ports %+v, servers %+v: want one server on one port", ports, srv)
	}
}

// An address another port holds (another Proxy's, a person's) is
// Neutron's 409 IpAddressAlreadyAllocated: transient, as the operator's
// own replacement frees it once the old server is deleted; no server is
// made and the other port stays.
func TestTakenAddressMakesNoServer(t *testing.T) {
	c := startCloud(t)
	ctx := context.Background()
	if _, err := c.provider(t).Create(ctx, staticRequest("proxy-holder", "10.0.0.204/24")); err != nil {
		t.Fatal(err)
	}
	req := staticRequest("proxy-second", "10.0.0.204/24")
	req.UID = "0a1b2c3d-8a4b-4c3d-9e2f-5f1d7c2e4e5f"
	_, err := c.provider(t).Create(ctx, req)
	if contract.ClassOf(err) != contract.ClassTransient || err == nil || !strings.Contains(err.Error(), "already allocated") {
		t.Fatalf("Create of a taken address = %v, want a transient error with Neutron's IpAddressAlreadyAllocated", err)
	}
	if s := named(c, req.Name); len(s) != 0 {
		t.Errorf("servers made on a taken address: %+v", s)
	}
	if ps := c.fake.Ports(); len(ps) != 1 || ps[0].Name != "proxy-holder" {
		t.Errorf("ports %+v, want the holder's alone", ps)
	}
}

// The port carries the managed security group: Nova applies a create's
// security groups only to ports it makes itself.
func TestPortCarriesTheManagedGroup(t *testing.T) {
	c := startCloud(t)
	c.withOptions()
	if _, err := c.provider(t).Create(context.Background(), staticRequest("proxy-static-sg", "10.0.0.205/24")); err != nil {
		t.Fatal(err)
	}
	groups := c.fake.SecurityGroups()
	ports := portsNamed(c, "proxy-static-sg")
	if len(groups) != 1 || len(ports) != 1 || !slices.Equal(ports[0].SecurityGroups, []string{groups[0].ID}) {
		t.Errorf("port %+v, groups %+v: want the port in the managed group alone", ports, groups)
	}
}

// Get reports the static address the server was made with, and nothing
// else: an ACTIVE server whose addresses lack it is Provisioning, with a
// message naming both.
func TestGetReportsExactlyTheStaticAddress(t *testing.T) {
	s := servers.Server{Status: "ACTIVE", Metadata: map[string]string{"egressproxies.io:address": "10.0.0.200"},
		Addresses: map[string]any{"private": []any{map[string]any{"addr": "10.0.0.7", "OS-EXT-IPS:type": "fixed"}}}}
	state, ip, msg := stateOf(s)
	if state != contract.StateProvisioning || ip != "" || !strings.Contains(msg, "10.0.0.200") || !strings.Contains(msg, "10.0.0.7") {
		t.Errorf("stateOf without the static address = %s %q %q, want Provisioning naming 10.0.0.200 and 10.0.0.7", state, ip, msg)
	}
	s.Addresses["private"] = append(s.Addresses["private"].([]any), map[string]any{"addr": "10.0.0.200", "OS-EXT-IPS:type": "fixed"})
	if state, ip, _ := stateOf(s); state != contract.StateRunning || ip != "10.0.0.200" {
		t.Errorf("stateOf with it = %s %q, want Running at 10.0.0.200", state, ip)
	}
}

// networkData is the part of network_data.json the control reads: the
// networks with their address, netmask, routes and dns services.
type networkData struct {
	Networks []struct {
		Type      string `json:"type"`
		IPAddress string `json:"ip_address"`
		Netmask   string `json:"netmask"`
		Routes    []struct {
			Network, Netmask, Gateway string
		} `json:"routes"`
		Services []struct {
			Type, Address string
		} `json:"services"`
	} `json:"networks"`
}

// parseNetworkData reads the static network of network_data.json as
// cloud-init's OpenStack datasource does (convert_net_json): the first
// "ipv4" network's address and netmask, its default route's gateway and
// its dns services.
func parseNetworkData(raw []byte) (contract.StaticNetwork, error) {
	var nd networkData
	if err := json.Unmarshal(raw, &nd); err != nil {
		return contract.StaticNetwork{}, err
	}
	for _, n := range nd.Networks {
		if n.Type != "ipv4" {
			continue
		}
		var out contract.StaticNetwork
		addr, err := netip.ParseAddr(n.IPAddress)
		if err != nil {
			return out, fmt.Errorf("network_data.json: ip_address %q: %w", n.IPAddress, err)
		}
		mask, err := netip.ParseAddr(n.Netmask)
		if err != nil {
			return out, fmt.Errorf("network_data.json: netmask %q: %w", n.Netmask, err)
		}
		bits := 0
		for _, b := range mask.As4() {
			for ; b&0x80 != 0; b <<= 1 {
				bits++
			}
		}
		out.Address = netip.PrefixFrom(addr, bits)
		for _, r := range n.Routes {
			if r.Network == "0.0.0.0" && r.Netmask == "0.0.0.0" {
				out.Gateway, _ = netip.ParseAddr(r.Gateway)
			}
		}
		for _, s := range n.Services {
			if d, err := netip.ParseAddr(s.Address); s.Type == "dns" && err == nil {
				out.DNS = append(out.DNS, d)
			}
		}
		return out, nil
	}
	return contract.StaticNetwork{}, fmt.Errorf("network_data.json has no static ipv4 network: %s", raw)
}

// A server on its way out (a person deleted it; Nova unbinds the port only
// once it is gone) still holds the instance's port: Create waits, with a
// transient error naming both, rather than booting a server Nova would
// refuse (409 PortInUse) or taking the port away.
func TestPortStillBoundWaits(t *testing.T) {
	c := startCloud(t, func(o *osfake.Options) { o.HoldBuilds = true })
	ctx := context.Background()
	req := staticRequest("proxy-static-bound", "10.0.0.206/24")
	inst, err := c.provider(t).Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (control{c}).BeginDelete(ctx, inst.ProviderID); err != nil {
		t.Fatal(err)
	}
	calls := 0
	c.fake.SetGate(func(r *http.Request) error {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/servers") {
			calls++
		}
		return c.gate.Pass(r.Context())
	})
	_, err = c.provider(t).Create(ctx, req)
	if contract.ClassOf(err) != contract.ClassTransient || err == nil || !strings.Contains(err.Error(), "still uses it") {
		t.Errorf("Create while the old server holds the port = %v, want a transient error saying so", err)
	}
	if calls != 0 {
		t.Errorf("Create sent %d server creates", calls)
	}
	if ps := portsNamed(c, req.Name); len(ps) != 1 {
		t.Errorf("ports %+v, want the one port, kept", ps)
	}
}

// With a token that sees other projects (an admin's: Neutron lists every
// project's groups to it, neutron/conf/policies/security_group.py), a group
// name matches one group per project. The provider looks groups up in the
// token's project only, as Nova does for a server's groups
// (nova/network/neutron.py _process_security_groups, tenant_id): another
// project's "default" and another project's managed group are not ours.
func TestSecurityGroupsAreLookedUpInTheTokensProject(t *testing.T) {
	c := startCloud(t, func(o *osfake.Options) { o.Admin = true })
	c.withOptions()
	for k, r := range c.cfg.Regions {
		r.SecurityGroups = []string{"web"}
		c.cfg.Regions[k] = r
	}
	ours := c.fake.AddSecurityGroup("web", "ours")
	c.fake.AddProjectSecurityGroup("other-project", "web", "theirs")
	theirs := c.fake.AddProjectSecurityGroup("other-project", managedGroupName, managedGroupDescription)
	if _, err := c.provider(t).Create(context.Background(), staticRequest("proxy-scoped-sg", "10.0.0.206/24")); err != nil {
		t.Fatalf("Create with another project's groups of the same names: %v", err)
	}
	ports := portsNamed(c, "proxy-scoped-sg")
	if len(ports) != 1 || len(ports[0].SecurityGroups) != 2 || ports[0].SecurityGroups[0] != ours || ports[0].SecurityGroups[1] == theirs {
		t.Errorf("the port's groups: %+v; want %s (this project's web), then this project's managed group, not %s", ports, ours, theirs)
	}
}
