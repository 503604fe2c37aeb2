package osfake_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"

	"github.com/egress-proxies/egress-proxies-operator/providers/openstack/osfake"
)

// static is a subnet without DHCP, whose guests read their address from
// network_data.json.
var static = osfake.Subnet{CIDR: "10.0.0.0/24", GatewayIP: "10.0.0.1", DNS: []string{"10.0.0.2"}}

// A port with a fixed IP as Zed's Neutron makes one: the address must be
// a host of a subnet of the network, one address one port (409
// IpAddressAlreadyAllocated); tags in a create are taken and, without
// ML2's tag_ports_during_bulk_creation driver, not kept.
func TestPortFixedIPs(t *testing.T) {
	c, compute := start(t, func(o *osfake.Options) { o.Network.Subnets = []osfake.Subnet{static} })
	n := network(t, compute)
	ctx := context.Background()
	net := c.Options().Network
	sub := net.Subnets[0]
	pages, err := subnets.List(n, subnets.ListOpts{NetworkID: net.ID, IPVersion: 4}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, err := subnets.ExtractSubnets(pages)
	if err != nil || len(all) != 1 || all[0].ID != sub.ID || all[0].GatewayIP != "10.0.0.1" || !slices.Equal(all[0].DNSNameservers, []string{"10.0.0.2"}) || all[0].EnableDHCP {
		t.Fatalf("subnets %+v, %v", all, err)
	}
	mk := func(ip string) (*ports.Port, error) {
		return ports.Create(ctx, n, ports.CreateOpts{NetworkID: net.ID, Name: "p", FixedIPs: []ports.IP{{SubnetID: sub.ID, IPAddress: ip}}}).Extract()
	}
	p, err := mk("10.0.0.50")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.FixedIPs) != 1 || p.FixedIPs[0].IPAddress != "10.0.0.50" || p.DeviceID != "" || !slices.Equal(p.SecurityGroups, []string{"default"}) {
		t.Errorf("port %+v", p)
	}
	_, err = mk("10.0.0.50")
	wantStatus(t, "the same address again", err, http.StatusConflict)
	if !strings.Contains(err.Error(), "IP address 10.0.0.50 already allocated in subnet "+sub.ID) {
		t.Errorf("taken address: %v, want IpAddressAlreadyAllocated's text", err)
	}
	for _, bad := range []string{"10.0.1.5", "10.0.0.0", "10.0.0.255"} {
		_, err = mk(bad)
		wantStatus(t, bad, err, http.StatusBadRequest)
		if err != nil && !strings.Contains(err.Error(), "IP address "+bad+" is not a valid IP for the specified subnet.") {
			t.Errorf("%s: %v, want InvalidIpForSubnet's text", bad, err)
		}
	}
	_, err = ports.Create(ctx, n, ports.CreateOpts{NetworkID: net.ID, FixedIPs: []ports.IP{{SubnetID: "nope", IPAddress: "10.0.0.60"}}}).Extract()
	wantStatus(t, "a subnet of no network", err, http.StatusBadRequest)
	_, err = ports.Create(ctx, n, ports.CreateOpts{NetworkID: net.ID, ValueSpecs: &map[string]string{"osreal_unknown": "x"}}).Extract()
	wantStatus(t, "an unknown attribute", err, http.StatusBadRequest)
	if err != nil && !strings.Contains(err.Error(), "Unrecognized attribute(s) 'osreal_unknown'") {
		t.Errorf("an unknown attribute: %v", err)
	}
	tagged, err := ports.Create(ctx, n, taggedPort{ports.CreateOpts{NetworkID: net.ID, Name: "tagged"}, []string{"a", "b"}}).Extract()
	if err != nil || len(tagged.Tags) != 0 {
		t.Errorf("a create with tags: %+v, %v; want 201 and no tags kept", tagged, err)
	}
	_, err = ports.Create(ctx, n, taggedPort{ports.CreateOpts{NetworkID: net.ID, Name: "tagged"}, []string{"a", "a"}}).Extract()
	wantStatus(t, "tags not unique", err, http.StatusBadRequest)
	if err := ports.Delete(ctx, n, p.ID).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "a second delete", ports.Delete(ctx, n, p.ID).ExtractErr(), http.StatusNotFound)
	if _, err := mk("10.0.0.50"); err != nil {
		t.Errorf("the address of a deleted port: %v", err)
	}
}

// A server booted on a port: the port is bound to it and in use for any
// other server, its fixed IP is the server's address and network_data.json
// gives it with the subnet's gateway and resolvers; deleting the server
// leaves the port, unbound.
func TestServerOnAPort(t *testing.T) {
	c, compute := start(t, func(o *osfake.Options) { o.Network.Subnets = []osfake.Subnet{static} })
	n := network(t, compute)
	ctx := context.Background()
	net := c.Options().Network
	p, err := ports.Create(ctx, n, ports.CreateOpts{NetworkID: net.ID, FixedIPs: []ports.IP{{SubnetID: net.Subnets[0].ID, IPAddress: "10.0.0.77"}}}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	boot := func(name string) (*servers.Server, error) {
		return servers.Create(ctx, compute, servers.CreateOpts{
			Name: name, FlavorRef: "1", ImageRef: c.Options().Images[0].ID, Networks: []servers.Network{{Port: p.ID}},
		}, nil).Extract()
	}
	s, err := boot("on-port")
	if err != nil {
		t.Fatal(err)
	}
	got := get(t, compute, s.ID)
	if ip := got.Addresses[net.Name].([]any)[0].(map[string]any)["addr"]; got.Status != "ACTIVE" || ip != "10.0.0.77" {
		t.Errorf("server %s with addresses %v, want ACTIVE at 10.0.0.77", got.Status, got.Addresses)
	}
	if bound, _ := ports.Get(ctx, n, p.ID).Extract(); bound.DeviceID != s.ID || !strings.HasPrefix(bound.DeviceOwner, "compute:") {
		t.Errorf("port after boot: device %q owner %q", bound.DeviceID, bound.DeviceOwner)
	}
	_, err = boot("second")
	wantStatus(t, "a second server on the port", err, http.StatusConflict)
	_, err = servers.Create(ctx, compute, servers.CreateOpts{Name: "x", FlavorRef: "1", ImageRef: c.Options().Images[0].ID,
		Networks: []servers.Network{{Port: "9b7c1c42-5c0e-4d0b-a0f6-46a4b8a5e0f3"}}}, nil).Extract()
	wantStatus(t, "an unknown port", err, http.StatusBadRequest)

	raw, err := c.NetworkData(s.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"type":"ipv4"`, `"ip_address":"10.0.0.77"`, `"netmask":"255.255.255.0"`, `"gateway":"10.0.0.1"`, `{"address":"10.0.0.2","type":"dns"}`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("network_data.json %s lacks %s", raw, want)
		}
	}

	if err := servers.Delete(ctx, compute, s.ID).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	_ = get404(compute, s.ID)
	left, err := ports.Get(ctx, n, p.ID).Extract()
	if err != nil || left.DeviceID != "" || left.DeviceOwner != "" {
		t.Errorf("port after the server's delete: %+v, %v; want it there, unbound", left, err)
	}
}

// Nova binds a port once the scheduler placed the server: while it is
// scheduling the port has no device_id.
func TestPortIsBoundOncePlaced(t *testing.T) {
	c, compute := start(t, func(o *osfake.Options) { o.Network.Subnets = []osfake.Subnet{static}; o.HoldScheduling = true })
	n := network(t, compute)
	ctx := context.Background()
	net := c.Options().Network
	p, err := ports.Create(ctx, n, ports.CreateOpts{NetworkID: net.ID, FixedIPs: []ports.IP{{SubnetID: net.Subnets[0].ID, IPAddress: "10.0.0.88"}}}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	s, err := servers.Create(ctx, compute, servers.CreateOpts{Name: "placed", FlavorRef: "1", ImageRef: c.Options().Images[0].ID, Networks: []servers.Network{{Port: p.ID}}}, nil).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := ports.Get(ctx, n, p.ID).Extract(); got.DeviceID != "" {
		t.Errorf("port while the server is scheduling: device %q, want none yet", got.DeviceID)
	}
	if err := c.PlaceServer(s.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := ports.Get(ctx, n, p.ID).Extract(); got.DeviceID != s.ID {
		t.Errorf("port once placed: device %q, want %s", got.DeviceID, s.ID)
	}
}

// get404 reads the server once more (the fake finishes a delete by the
// next request).
func get404(compute *gophercloud.ServiceClient, id string) error {
	_, err := servers.Get(context.Background(), compute, id).Extract()
	return err
}

// A subnet with DHCP: network_data.json says only ipv4_dhcp, as Nova's
// does when the subnet has a DHCP server.
func TestNetworkDataWithDHCP(t *testing.T) {
	c, compute := start(t, nil)
	n := network(t, compute)
	ctx := context.Background()
	net := c.Options().Network
	p, err := ports.Create(ctx, n, ports.CreateOpts{NetworkID: net.ID, FixedIPs: []ports.IP{{SubnetID: net.Subnets[0].ID, IPAddress: "10.0.0.99"}}}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	s, err := servers.Create(ctx, compute, servers.CreateOpts{Name: "dhcp", FlavorRef: "1", ImageRef: c.Options().Images[0].ID, Networks: []servers.Network{{Port: p.ID}}}, nil).Extract()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := c.NetworkData(s.ID)
	if err != nil || !strings.Contains(string(raw), `"type":"ipv4_dhcp"`) || strings.Contains(string(raw), "ip_address") {
		t.Errorf("network_data.json on a DHCP subnet: %s, %v", raw, err)
	}
}

// taggedPort is a port create with tags, which gophercloud's CreateOpts
// does not carry.
type taggedPort struct {
	ports.CreateOpts
	tags []string
}

func (o taggedPort) ToPortCreateMap() (map[string]any, error) {
	m, err := o.CreateOpts.ToPortCreateMap()
	if err == nil {
		m["port"].(map[string]any)["tags"] = o.tags
	}
	return m, err
}

// FailCall refuses one request by its number, before the API sees it,
// with the refusal of the service it goes to: Neutron's 409 OverQuota
// and 403 PolicyNotAuthorized, Nova's 403s.
func TestFailCallAnswersTheServicesRefusal(t *testing.T) {
	c, compute := start(t, func(o *osfake.Options) { o.Network.Subnets = []osfake.Subnet{static} })
	n := network(t, compute)
	ctx := context.Background()
	create := func() error {
		_, err := ports.Create(ctx, n, ports.CreateOpts{NetworkID: c.Options().Network.ID, Name: "refused"}).Extract()
		return err
	}
	count := func() int {
		pages, err := ports.List(n, ports.ListOpts{Name: "refused"}).AllPages(ctx)
		if err != nil {
			t.Fatal(err)
		}
		all, err := ports.ExtractPorts(pages)
		if err != nil {
			t.Fatal(err)
		}
		return len(all)
	}
	for _, tc := range []struct {
		fault  osfake.CallFault
		status int
		body   string
	}{
		{osfake.QuotaFault, 409, `"OverQuota"`},
		{osfake.PolicyFault, 403, `(rule:create_port) is disallowed by policy`},
	} {
		c.FailCall(1, tc.fault)
		var code gophercloud.ErrUnexpectedResponseCode
		if err := create(); !errors.As(err, &code) || code.Actual != tc.status || !strings.Contains(string(code.Body), tc.body) {
			t.Errorf("a port create refused with %v = %v, want %d with %s", tc.fault, err, tc.status, tc.body)
		}
	}
	if got := count(); got != 0 {
		t.Errorf("%d ports made by refused creates, want none", got)
	}
	c.FailCall(2, osfake.PolicyFault)
	if err := create(); err != nil {
		t.Errorf("the request before the refused one = %v", err)
	}
	_, err := servers.List(compute, nil).AllPages(ctx)
	if !gophercloud.ResponseCodeIs(err, 403) || !strings.Contains(err.Error(), "Policy doesn't allow os_compute_api:servers:detail") {
		t.Errorf("a server list refused by policy = %v, want Nova's 403", err)
	}
}
