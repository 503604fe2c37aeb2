package osfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Neutron's subnets and ports, what a provider that gives a server a
// static address calls: it makes a port with the address (fixed_ips) and
// boots the server on it. The Networking API reference, "Subnets" and
// "Ports" (https://docs.openstack.org/api-ref/network/v2/), and the Zed
// code that answers the calls:
//
//   - a fixed_ips entry's subnet must be on the port's network, else 400
//     InvalidInput "Failed to create port on network <net>, because
//     fixed_ips included invalid subnet <subnet>"; its ip_address must be
//     in the subnet and be neither its network nor its broadcast address,
//     else 400 InvalidIpForSubnet "IP address <ip> is not a valid IP for
//     the specified subnet." (neutron/db/ipam_backend_mixin.py
//     _get_subnet_for_fixed_ip, neutron/ipam/utils.py check_subnet_ip); an
//     address another port holds is 409 IpAddressAlreadyAllocated "IP
//     address <ip> already allocated in subnet <subnet>"
//     (neutron/ipam/exceptions.py, raised by
//     neutron/ipam/drivers/neutrondb_ipam/driver.py _verify_ip); an
//     address outside the allocation pools is allowed (only the generated
//     ones come from the pools);
//   - a body attribute the port resource does not have is 400
//     "Unrecognized attribute(s) '<names>'" (neutron_lib/api/attributes.py);
//     "tags" a port create takes (neutron/extensions/tagging.py,
//     TAG_ATTRIBUTE_MAP_PORTS: allow_post, a list of unique strings of at
//     most 255), but only ML2's tag_ports_during_bulk_creation extension
//     driver stores them (neutron/plugins/ml2/extensions/
//     tag_ports_during_bulk_creation.py process_create_port): a cloud
//     that does not load it, as the lane's (extension_drivers =
//     port_security), answers 201 and keeps no tags. The fake keeps none.
//     The lane showed it: TestDifferential's create with tags was 201
//     there, where this fake first answered 400;
//   - security_groups are IDs of the project's groups (404
//     SecurityGroupNotFound otherwise); without them the port gets the
//     project's default group;
//   - delete answers 204, 404 PortNotFound "Port <id> could not be
//     found." for an unknown one; a port a server uses may be deleted, and
//     Nova, told by Neutron (network-vif-deleted), detaches it from the
//     server (nova/compute/manager.py external_instance_event).
//
// Nova's side (nova/network/neutron.py):
//
//   - a server created with networks [{"port": <id>}] uses that port: one
//     that does not exist is 400 "Port id <id> could not be found."
//     (PortNotFound, HTTPBadRequest in servers.py create); one another
//     server uses (device_id set) is 409 "Port <id> is still in use."
//     (PortInUse, HTTPConflict), both checked by the API
//     (_validate_requested_port_ids); the compute host binds it once the
//     scheduler has placed the server (allocate_for_instance,
//     _update_ports_for_instance: device_id = the server, device_owner =
//     compute:<zone>), so during scheduling the port is still unbound (the
//     lane showed it: a port read right after the create had no
//     device_id);
//   - the security groups of a create apply only to ports Nova makes
//     (_create_ports_for_instance): a port passed in keeps its own;
//   - deleting the server does not delete a port the caller passed in
//     (deallocate_for_instance skips preexisting_port_ids and
//     _unbind_ports clears device_id and device_owner); ports Nova made
//     are deleted with the server;
//   - the server's addresses are its ports' fixed IPs, and the metadata
//     service's network_data.json (nova/virt/netutils.py
//     get_network_metadata) gives the guest the port's address with the
//     subnet's netmask, its gateway as the default route and its
//     dns_nameservers as dns services ("ipv4"), or only "ipv4_dhcp" when
//     the subnet runs DHCP (the dhcp_server meta,
//     nova/network/neutron.py _get_subnets_from_port).

// Subnet is a subnet of the fake's network.
type Subnet struct {
	ID, CIDR string
	// GatewayIP is the subnet's gateway_ip; "" is none.
	GatewayIP string
	// DNS is its dns_nameservers, in order.
	DNS []string
	// EnableDHCP is enable_dhcp: the guest then reads its address by DHCP
	// (network_data.json says only ipv4_dhcp).
	EnableDHCP bool
}

// port is one Neutron port.
type port struct {
	id, name, description, networkID string
	mac                              string
	fixedIPs                         []fixedIP
	securityGroups                   []string
	deviceID, deviceOwner            string
	created                          time.Time
}

type fixedIP struct {
	SubnetID  string `json:"subnet_id"`
	IPAddress string `json:"ip_address"`
}

func (c *Cloud) routePorts(mux *http.ServeMux) {
	base := "/network/{region}/v2.0"
	for pattern, h := range map[string]http.HandlerFunc{
		"GET /subnets":       c.listSubnets,
		"GET /ports":         c.listPorts,
		"POST /ports":        c.createPort,
		"GET /ports/{id}":    c.showPort,
		"DELETE /ports/{id}": c.deletePort,
	} {
		method, path, _ := strings.Cut(pattern, " ")
		mux.Handle(method+" "+base+path, c.neutron(h))
	}
}

func (c *Cloud) subnetView(s Subnet) map[string]any {
	p := netip.MustParsePrefix(s.CIDR)
	var gw any
	if s.GatewayIP != "" {
		gw = s.GatewayIP
	}
	dns := s.DNS
	if dns == nil {
		dns = []string{}
	}
	return map[string]any{
		"id": s.ID, "name": "", "network_id": c.opts.Network.ID, "ip_version": 4, "cidr": s.CIDR, "gateway_ip": gw,
		"dns_nameservers": dns, "enable_dhcp": s.EnableDHCP, "host_routes": []any{}, "project_id": c.projectID, "tenant_id": c.projectID,
		"allocation_pools": []any{map[string]any{"start": p.Masked().Addr().Next().Next().String(), "end": lastHost(p).String()}},
	}
}

// lastHost is the last address before the broadcast address.
func lastHost(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	v := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) + uint32(1)<<(32-p.Bits()) - 2
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// listSubnets filters on network_id and ip_version; the network's are all
// IPv4.
func (c *Cloud) listSubnets(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	out := []any{}
	if (q.Get("network_id") == "" || q.Get("network_id") == c.opts.Network.ID) && (q.Get("ip_version") == "" || q.Get("ip_version") == "4") {
		for _, s := range c.opts.Network.Subnets {
			out = append(out, c.subnetView(s))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"subnets": out})
}

func (c *Cloud) portView(p *port) map[string]any {
	ips := make([]any, len(p.fixedIPs))
	for i, f := range p.fixedIPs {
		ips[i] = f
	}
	ts := p.created.Format(time.RFC3339)
	return map[string]any{
		"id": p.id, "name": p.name, "description": p.description, "network_id": p.networkID, "mac_address": p.mac,
		"fixed_ips": ips, "security_groups": p.securityGroups, "device_id": p.deviceID, "device_owner": p.deviceOwner,
		"admin_state_up": true, "status": map[bool]string{true: "ACTIVE", false: "DOWN"}[p.deviceID != ""],
		"project_id": c.projectID, "tenant_id": c.projectID, "tags": []string{}, "created_at": ts, "updated_at": ts, "revision_number": 1,
	}
}

// listPorts filters on the attributes the API reference lists as query
// parameters: network_id, name, description, device_id.
func (c *Cloud) listPorts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []any{}
	for _, p := range c.at(r).sortedPorts() {
		if !matches(q.Get("network_id"), p.networkID) || !matches(q.Get("name"), p.name) ||
			!matches(q.Get("description"), p.description) || !matches(q.Get("device_id"), p.deviceID) {
			continue
		}
		out = append(out, c.portView(p))
	}
	writeJSON(w, http.StatusOK, map[string]any{"ports": out})
}

func matches(filter, value string) bool { return filter == "" || filter == value }

// sortedPorts are the region's ports oldest first. Called with c.mu held.
func (rs *regionState) sortedPorts() []*port {
	out := make([]*port, 0, len(rs.ports))
	for _, p := range rs.ports {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *port) int {
		if d := a.created.Compare(b.created); d != 0 {
			return d
		}
		return strings.Compare(a.id, b.id)
	})
	return out
}

// portAttributes are the port attributes a create may set
// (neutron_lib/api/definitions/port.py and the extensions Zed's ML2
// loads that this fake knows of).
var portAttributes = []string{"network_id", "name", "description", "admin_state_up", "mac_address", "fixed_ips", "device_id",
	"device_owner", "tenant_id", "project_id", "security_groups", "allowed_address_pairs", "port_security_enabled", "tags"}

// decodeCreate reads a create's {"<resource>": {…}} body and checks its
// attributes against allowed, or answers Neutron's 400 and returns nil:
// "Resource body required", or "Unrecognized attribute(s) '…'"
// (neutron_lib/api/attributes.py). It returns the resource re-encoded.
func decodeCreate(w http.ResponseWriter, r *http.Request, resource string, allowed []string) []byte {
	var raw map[string]map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&raw); err != nil || raw[resource] == nil {
		neutronError(w, http.StatusBadRequest, "HTTPBadRequest", "Resource body required")
		return nil
	}
	var extra []string
	for k := range raw[resource] {
		if !slices.Contains(allowed, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		neutronError(w, http.StatusBadRequest, "HTTPBadRequest", fmt.Sprintf("Unrecognized attribute(s) '%s'", strings.Join(extra, ", ")))
		return nil
	}
	b, _ := json.Marshal(raw[resource])
	return b
}

func (c *Cloud) createPort(w http.ResponseWriter, r *http.Request) {
	b := decodeCreate(w, r, "port", portAttributes)
	if b == nil {
		return
	}
	var body struct {
		NetworkID      string    `json:"network_id"`
		Name           string    `json:"name"`
		Description    string    `json:"description"`
		FixedIPs       []fixedIP `json:"fixed_ips"`
		SecurityGroups *[]string `json:"security_groups"`
		Tags           []string  `json:"tags"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		neutronError(w, http.StatusBadRequest, "HTTPBadRequest", "Invalid input for operation: "+err.Error())
		return
	}
	for i, t := range body.Tags {
		if t == "" || len(t) > 255 || slices.Contains(body.Tags[:i], t) {
			neutronError(w, http.StatusBadRequest, "HTTPBadRequest", fmt.Sprintf("Invalid input for tags. Reason: '%s' is not a valid list of unique strings.", t))
			return
		}
	}
	if body.NetworkID != c.opts.Network.ID {
		neutronError(w, http.StatusNotFound, "NetworkNotFound", fmt.Sprintf("Network %s could not be found.", body.NetworkID))
		return
	}
	if len(body.Name) > 255 || len(body.Description) > 255 {
		neutronError(w, http.StatusBadRequest, "HTTPBadRequest", "Invalid input for name. Reason: too long.")
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	region := r.PathValue("region")
	rs := c.in(region)
	p := &port{id: newUUID(), name: body.Name, description: body.Description, networkID: body.NetworkID, created: time.Now().UTC().Truncate(time.Second)}
	p.mac = fmt.Sprintf("fa:16:3e:%s:%s:%s", p.id[0:2], p.id[2:4], p.id[4:6])
	for _, f := range body.FixedIPs {
		subnet, ok := c.subnet(f.SubnetID)
		if !ok {
			neutronError(w, http.StatusBadRequest, "InvalidInput", fmt.Sprintf("Invalid input for operation: Failed to create port on network %s, because fixed_ips included invalid subnet %s.", body.NetworkID, f.SubnetID))
			return
		}
		if f.IPAddress == "" {
			f.IPAddress = c.freeAddress(region, subnet)
		}
		ip, err := netip.ParseAddr(f.IPAddress)
		cidr := netip.MustParsePrefix(subnet.CIDR)
		if err != nil || !cidr.Contains(ip) || ip == cidr.Masked().Addr() || ip == lastHost(cidr).Next() {
			neutronError(w, http.StatusBadRequest, "InvalidIpForSubnet", fmt.Sprintf("IP address %s is not a valid IP for the specified subnet.", f.IPAddress))
			return
		}
		if c.addressTaken(region, f.IPAddress) {
			neutronError(w, http.StatusConflict, "IpAddressAlreadyAllocated", fmt.Sprintf("IP address %s already allocated in subnet %s", f.IPAddress, subnet.ID))
			return
		}
		p.fixedIPs = append(p.fixedIPs, f)
	}
	if len(body.FixedIPs) == 0 && len(c.opts.Network.Subnets) > 0 {
		// No fixed_ips: IPAM gives the port an address of the network
		// (neutron/db/ipam_pluggable_backend.py, _ipam_get_subnets: one
		// IPv4 subnet of the network), here its first subnet's.
		if a := c.freeAddress(region, c.opts.Network.Subnets[0]); a != "" {
			p.fixedIPs = []fixedIP{{SubnetID: c.opts.Network.Subnets[0].ID, IPAddress: a}}
		}
	}
	if body.SecurityGroups == nil {
		p.securityGroups = []string{"default"}
	} else {
		for _, id := range *body.SecurityGroups {
			if rs.secGroups[id] == nil {
				neutronError(w, http.StatusNotFound, "SecurityGroupNotFound", fmt.Sprintf("Security group %s does not exist", id))
				return
			}
		}
		p.securityGroups = slices.Clone(*body.SecurityGroups)
	}
	rs.ports[p.id] = p
	writeJSON(w, http.StatusCreated, map[string]any{"port": c.portView(p)})
}

// portOr404 returns the port the path names in the path's region, or
// answers Neutron's 404 and returns nil. The caller holds c.mu.
func (c *Cloud) portOr404(w http.ResponseWriter, r *http.Request) *port {
	p := c.at(r).ports[r.PathValue("id")]
	if p == nil {
		neutronError(w, http.StatusNotFound, "PortNotFound", fmt.Sprintf("Port %s could not be found.", r.PathValue("id")))
	}
	return p
}

func (c *Cloud) showPort(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.portOr404(w, r)
	if p == nil {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"port": c.portView(p)})
}

// deletePort deletes a port, one a server uses too: Nova then detaches
// it, and the server loses its address.
func (c *Cloud) deletePort(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.portOr404(w, r)
	if p == nil {
		return
	}
	for _, s := range c.servers {
		if s.region != r.PathValue("region") || !slices.Contains(s.ports, p.id) {
			continue
		}
		s.ports = slices.DeleteFunc(s.ports, func(id string) bool { return id == p.id })
		s.addresses = slices.DeleteFunc(s.addresses, func(a string) bool {
			return slices.ContainsFunc(p.fixedIPs, func(f fixedIP) bool { return f.IPAddress == a })
		})
	}
	c.at(r).disassociateFloatingIPs(p.id)
	delete(c.at(r).ports, p.id)
	w.WriteHeader(http.StatusNoContent)
}

// subnet finds a subnet of the network. Called with c.mu held.
func (c *Cloud) subnet(id string) (Subnet, bool) {
	for _, s := range c.opts.Network.Subnets {
		if s.ID == id {
			return s, true
		}
	}
	return Subnet{}, false
}

// addressTaken tells whether a port or a server's own address holds ip
// in the region (each region's network is its own). Called with c.mu
// held.
func (c *Cloud) addressTaken(region, ip string) bool {
	for _, p := range c.in(region).ports {
		if slices.ContainsFunc(p.fixedIPs, func(f fixedIP) bool { return f.IPAddress == ip }) {
			return true
		}
	}
	for _, s := range c.servers {
		if s.region == region && slices.Contains(s.addresses, ip) {
			return true
		}
	}
	return false
}

// freeAddress is the first address of the subnet's pool nothing in the
// region holds. Called with c.mu held.
func (c *Cloud) freeAddress(region string, s Subnet) string {
	p := netip.MustParsePrefix(s.CIDR)
	for a := p.Masked().Addr().Next().Next(); p.Contains(a) && a != lastHost(p).Next(); a = a.Next() {
		if a.String() != s.GatewayIP && !c.addressTaken(region, a.String()) {
			return a.String()
		}
	}
	return ""
}

// takePorts checks the ports a server create names (Nova's
// _validate_requested_port_ids) and gives them to the server, which binds
// them once placed (bindPorts); false when it answered an error. Called
// with c.mu held.
func (c *Cloud) takePorts(w http.ResponseWriter, s *server, ids []string) bool {
	ports := c.in(s.region).ports
	for _, id := range ids {
		p := ports[id]
		if p == nil {
			novaError(w, http.StatusBadRequest, fmt.Sprintf("Port id %s could not be found.", id))
			return false
		}
		if p.deviceID != "" {
			novaError(w, http.StatusConflict, fmt.Sprintf("Port %s is still in use.", id))
			return false
		}
	}
	for _, id := range ids {
		s.ports = append(s.ports, id)
		s.securityGroups = append(s.securityGroups, ports[id].securityGroups...)
	}
	return true
}

// bindPorts binds the server's ports to it, as the compute host does once
// the scheduler placed it (_update_ports_for_instance). Called with c.mu
// held.
func (c *Cloud) bindPorts(s *server) {
	for _, id := range s.ports {
		if p := c.in(s.region).ports[id]; p != nil && p.deviceID == "" {
			p.deviceID, p.deviceOwner = s.id, "compute:"+s.zone
		}
	}
}

// portAddresses are the fixed IPs of the server's ports. Called with c.mu
// held.
func (c *Cloud) portAddresses(s *server) []string {
	var out []string
	for _, id := range s.ports {
		if p := c.in(s.region).ports[id]; p != nil {
			for _, f := range p.fixedIPs {
				out = append(out, f.IPAddress)
			}
		}
	}
	return out
}

// unbindPorts is Nova's deallocate_for_instance for a server that is
// gone: the ports passed in stay, unbound. Called with c.mu held.
func (c *Cloud) unbindPorts(s *server) {
	for _, id := range s.ports {
		if p := c.in(s.region).ports[id]; p != nil && p.deviceID == s.id {
			p.deviceID, p.deviceOwner = "", ""
		}
	}
}

// Port is a snapshot of one port, for tests.
type Port struct {
	ID, Region, Name, Description, DeviceID string
	// IPs are the fixed IPs' addresses.
	IPs            []string
	SecurityGroups []string
}

// Ports lists every port, region by region (in Options.Regions' order),
// oldest first.
func (c *Cloud) Ports() []Port {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(time.Now())
	var out []Port
	for _, region := range c.opts.Regions {
		for _, p := range c.in(region).sortedPorts() {
			ps := Port{ID: p.id, Region: region, Name: p.name, Description: p.description, DeviceID: p.deviceID, SecurityGroups: slices.Clone(p.securityGroups)}
			for _, f := range p.fixedIPs {
				ps.IPs = append(ps.IPs, f.IPAddress)
			}
			out = append(out, ps)
		}
	}
	return out
}

// NetworkData is the network_data.json the metadata service (and a
// config drive) serves the server's guest, built as Nova's
// get_network_metadata builds it (nova/virt/netutils.py): one link and
// one network per port with an IPv4 fixed IP, "ipv4" with the address,
// netmask, the subnet's gateway as the default route and its resolvers
// as dns services, or "ipv4_dhcp" without them when the subnet runs DHCP.
func (c *Cloud) NetworkData(serverID string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(time.Now())
	s := c.servers[serverID]
	if s == nil {
		return nil, fmt.Errorf("osfake: no server %s", serverID)
	}
	links, nets, services := []any{}, []any{}, []any{}
	for i, id := range s.ports {
		p := c.in(s.region).ports[id]
		if p == nil || len(p.fixedIPs) == 0 {
			continue
		}
		sub, _ := c.subnet(p.fixedIPs[0].SubnetID)
		link := fmt.Sprintf("tap%s", p.id[:11])
		links = append(links, map[string]any{"id": link, "vif_id": p.id, "type": "ovs", "mtu": 1500, "ethernet_mac_address": p.mac})
		n := map[string]any{"id": fmt.Sprintf("network%d", i), "link": link, "network_id": p.networkID}
		if sub.EnableDHCP {
			n["type"] = "ipv4_dhcp"
			nets = append(nets, n)
			continue
		}
		prefix := netip.MustParsePrefix(sub.CIDR)
		n["type"], n["ip_address"], n["netmask"] = "ipv4", p.fixedIPs[0].IPAddress, netmask(prefix.Bits())
		routes := []any{}
		if sub.GatewayIP != "" {
			routes = append(routes, map[string]any{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": sub.GatewayIP})
		}
		dns := []any{}
		for _, d := range sub.DNS {
			svc := map[string]any{"type": "dns", "address": d}
			dns = append(dns, svc)
			if !slices.ContainsFunc(services, func(x any) bool { return x.(map[string]any)["address"] == d }) {
				services = append(services, svc)
			}
		}
		n["routes"], n["services"] = routes, dns
		nets = append(nets, n)
	}
	return json.Marshal(map[string]any{"links": links, "networks": nets, "services": services})
}

// netmask is a prefix length as a dotted netmask.
func netmask(bits int) string {
	m := ^uint32(0) << (32 - bits)
	return fmt.Sprintf("%d.%d.%d.%d", m>>24, m>>16&0xff, m>>8&0xff, m&0xff)
}
