package osfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Neutron's floating IPs: what a provider that keeps an egress address per
// replica calls (docs/openstack-provider.md, "Floating IPs"). The
// Networking API reference, "Floating IPs (floatingips)" and "Tags"
// (https://docs.openstack.org/api-ref/network/v2/), and the Zed code that
// answers the calls (neutron/db/l3_db.py unless named):
//
//   - a create takes floating_network_id (required: 400 "Failed to parse
//     request. Required attribute 'floating_network_id' not specified"),
//     floating_ip_address, subnet_id, port_id, fixed_ip_address,
//     description, tenant_id and project_id (neutron_lib/api/definitions/
//     l3.py, neutron/extensions/standardattrdescription.py); "tags" is not
//     allowed in POST for floating IPs (neutron/extensions/tagging.py:
//     only ports get allow_post) and answers 400 "Attribute 'tags' not
//     allowed in POST"; any other attribute is 400 "Unrecognized
//     attribute(s) '…'" (neutron_lib/api/attributes.py);
//   - _create_floatingip: a network that is not external is 400
//     BadRequest "Bad floatingip request: Network <id> is not a valid
//     external network."; an unknown one 404 NetworkNotFound "Network <id>
//     could not be found."; no free address 409 IpAddressGenerationFailure
//     "No more IP addresses available on network <id>."
//     (neutron/db/ipam_pluggable_backend.py); a taken floating_ip_address
//     409 IpAddressAlreadyAllocated; the quota 409 OverQuota "Quota
//     exceeded for resources: ['floatingip']." (Options.Quota.FloatingIPs,
//     zero unlimited here). 201, status DOWN until associated
//     (L3RouterPlugin.create_floatingip);
//   - an update's port_id associates, a null one disassociates, and a body
//     without port_id keeps the association; _check_and_get_fip_assoc
//     never checks the address's current port, so it moves from one port
//     to another (_update_fip_assoc). The port must exist (404
//     PortNotFound "Port <id> could not be found.") and be reachable: a
//     router with an interface on its subnet and its gateway on the
//     external network (get_router_for_floatingip), else 404
//     ExternalGatewayForFloatingIPNotFound "External network <ext> is not
//     reachable from subnet <subnet>.  Therefore, cannot associate Port
//     <port> with a Floating IP." (ExternalNetwork.Unrouted plays a cloud
//     without that router); a fixed IP that already has a floating IP on
//     the network is 409 FloatingIPPortAlreadyAssociated. 200;
//   - ML2's delete_port calls disassociate_floatingips: the address stays,
//     with port_id null (neutron/plugins/ml2/plugin.py);
//   - a delete is 204 whether associated or not (_delete_floatingip); an
//     unknown one 404 FloatingIPNotFound "Floating IP <id> could not be
//     found";
//   - a list filters on port_id, floating_ip_address, floating_network_id,
//     fixed_ip_address, description (is_filter), and tags (every tag of
//     the comma-separated list) and tags-any (one of them)
//     (neutron/objects/tag.py _apply_tag_filters: floating IPs have
//     tag_support);
//   - PUT …/floatingips/{id}/tags replaces the tags and answers 200 with
//     them (neutron/extensions/tagging.py update_all; each tag at most 255
//     characters, unique).

// ExternalNetwork is a network with router:external true whose one
// subnet floating IPs are allocated from.
type ExternalNetwork struct {
	ID string
	// CIDR is its subnet; addresses are handed out from its second host.
	CIDR string
	// Unrouted plays a cloud whose project network has no router to it:
	// association is refused.
	Unrouted bool
}

// floatingIP is one Neutron floating IP.
type floatingIP struct {
	id, address, networkID string
	portID, fixedIP        string
	description            string
	tags                   []string
	created                time.Time
	revision               int
}

func (c *Cloud) routeFloatingIPs(mux *http.ServeMux) {
	base := "/network/{region}/v2.0"
	for pattern, h := range map[string]http.HandlerFunc{
		"GET /floatingips":           c.listFloatingIPs,
		"POST /floatingips":          c.createFloatingIP,
		"GET /floatingips/{id}":      c.showFloatingIP,
		"PUT /floatingips/{id}":      c.updateFloatingIP,
		"DELETE /floatingips/{id}":   c.deleteFloatingIP,
		"PUT /floatingips/{id}/tags": c.replaceFloatingIPTags,
	} {
		method, path, _ := strings.Cut(pattern, " ")
		mux.Handle(method+" "+base+path, c.neutron(h))
	}
}

func (c *Cloud) floatingIPView(f *floatingIP) map[string]any {
	var portID, fixed, router any
	status := "DOWN"
	if f.portID != "" {
		portID, fixed, router, status = f.portID, f.fixedIP, "router-of-"+f.networkID, "ACTIVE"
	}
	ts := f.created.Format(time.RFC3339)
	return map[string]any{
		"id": f.id, "floating_ip_address": f.address, "floating_network_id": f.networkID, "port_id": portID,
		"fixed_ip_address": fixed, "router_id": router, "status": status, "description": f.description,
		"tags": slices.Clone(f.tags), "project_id": c.projectID, "tenant_id": c.projectID,
		"created_at": ts, "updated_at": ts, "revision_number": f.revision,
	}
}

// listFloatingIPs filters as the API reference's query parameters do.
func (c *Cloud) listFloatingIPs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []any{}
	for _, f := range c.at(r).sortedFloatingIPs() {
		if !matches(q.Get("port_id"), f.portID) || !matches(q.Get("floating_ip_address"), f.address) ||
			!matches(q.Get("floating_network_id"), f.networkID) || !matches(q.Get("fixed_ip_address"), f.fixedIP) ||
			!matches(q.Get("description"), f.description) || !hasTags(f.tags, q.Get("tags"), q.Get("tags-any")) {
			continue
		}
		out = append(out, c.floatingIPView(f))
	}
	writeJSON(w, http.StatusOK, map[string]any{"floatingips": out})
}

// hasTags is _apply_tag_filters: every tag of all, and one of any.
func hasTags(tags []string, all, any string) bool {
	for _, t := range strings.Split(all, ",") {
		if t != "" && !slices.Contains(tags, t) {
			return false
		}
	}
	return any == "" || slices.ContainsFunc(strings.Split(any, ","), func(t string) bool { return slices.Contains(tags, t) })
}

// sortedFloatingIPs are the region's floating IPs oldest first. Called
// with c.mu held.
func (rs *regionState) sortedFloatingIPs() []*floatingIP {
	out := make([]*floatingIP, 0, len(rs.floatingIPs))
	for _, f := range rs.floatingIPs {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b *floatingIP) int {
		if d := a.created.Compare(b.created); d != 0 {
			return d
		}
		return strings.Compare(a.id, b.id)
	})
	return out
}

// floatingIPAttributes are the attributes a create may set.
var floatingIPAttributes = []string{"floating_network_id", "floating_ip_address", "subnet_id", "port_id", "fixed_ip_address",
	"description", "tenant_id", "project_id"}

func (c *Cloud) createFloatingIP(w http.ResponseWriter, r *http.Request) {
	// "tags" is an attribute of the resource, but not one a create may
	// set: its own message, before the unrecognized ones.
	b := decodeCreate(w, r, "floatingip", append(slices.Clone(floatingIPAttributes), "tags"))
	if b == nil {
		return
	}
	var tagged struct {
		Tags *json.RawMessage `json:"tags"`
	}
	if _ = json.Unmarshal(b, &tagged); tagged.Tags != nil {
		neutronError(w, http.StatusBadRequest, "HTTPBadRequest", "Attribute 'tags' not allowed in POST")
		return
	}
	var body struct {
		NetworkID   string  `json:"floating_network_id"`
		Address     string  `json:"floating_ip_address"`
		PortID      *string `json:"port_id"`
		Description string  `json:"description"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		neutronError(w, http.StatusBadRequest, "HTTPBadRequest", "Invalid input for operation: "+err.Error())
		return
	}
	if body.NetworkID == "" {
		neutronError(w, http.StatusBadRequest, "HTTPBadRequest", "Failed to parse request. Required attribute 'floating_network_id' not specified")
		return
	}
	if len(body.Description) > 255 {
		neutronError(w, http.StatusBadRequest, "HTTPBadRequest", "Invalid input for description. Reason: too long.")
		return
	}
	ext := c.opts.External
	switch {
	case body.NetworkID == c.opts.Network.ID:
		neutronError(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("Bad floatingip request: Network %s is not a valid external network.", body.NetworkID))
		return
	case ext == nil || body.NetworkID != ext.ID:
		neutronError(w, http.StatusNotFound, "NetworkNotFound", fmt.Sprintf("Network %s could not be found.", body.NetworkID))
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rs := c.at(r)
	if q := c.opts.Quota.FloatingIPs; q > 0 && len(rs.floatingIPs) >= q {
		neutronError(w, http.StatusConflict, "OverQuota", "Quota exceeded for resources: ['floatingip'].")
		return
	}
	address := body.Address
	if address == "" {
		if address = c.freeFloatingAddress(ext); address == "" {
			neutronError(w, http.StatusConflict, "IpAddressGenerationFailure", fmt.Sprintf("No more IP addresses available on network %s.", ext.ID))
			return
		}
	} else if c.floatingAddressTaken(address) {
		neutronError(w, http.StatusConflict, "IpAddressAlreadyAllocated", fmt.Sprintf("IP address %s already allocated in subnet %s-subnet", address, ext.ID))
		return
	}
	f := &floatingIP{id: newUUID(), address: address, networkID: ext.ID, description: body.Description, tags: []string{},
		created: time.Now().UTC().Truncate(time.Second), revision: 1}
	if body.PortID != nil && *body.PortID != "" && !c.associate(w, rs, f, *body.PortID) {
		return
	}
	rs.floatingIPs[f.id] = f
	writeJSON(w, http.StatusCreated, map[string]any{"floatingip": c.floatingIPView(f)})
}

// freeFloatingAddress is the external subnet's first address no floating
// IP holds, from its second host on. Called with c.mu held.
func (c *Cloud) freeFloatingAddress(ext *ExternalNetwork) string {
	p := netip.MustParsePrefix(ext.CIDR)
	for a := p.Masked().Addr().Next().Next(); p.Contains(a) && a != lastHost(p).Next(); a = a.Next() {
		if !c.floatingAddressTaken(a.String()) {
			return a.String()
		}
	}
	return ""
}

// floatingAddressTaken tells whether a floating IP of any region holds
// address. Every region's external network is Options.External, one
// CIDR, so its addresses are handed out once across the regions: a
// public address is in one place, as a real cloud's regions, whose
// external networks are distinct, never share one. Called with c.mu held.
func (c *Cloud) floatingAddressTaken(address string) bool {
	for _, rs := range c.regions {
		for _, f := range rs.floatingIPs {
			if f.address == address {
				return true
			}
		}
	}
	return false
}

// associate checks and makes f's association with the port of f's
// region, or answers Neutron's error and returns false. Called with c.mu
// held.
func (c *Cloud) associate(w http.ResponseWriter, rs *regionState, f *floatingIP, portID string) bool {
	p := rs.ports[portID]
	if p == nil {
		neutronError(w, http.StatusNotFound, "PortNotFound", fmt.Sprintf("Port %s could not be found.", portID))
		return false
	}
	if len(p.fixedIPs) == 0 {
		neutronError(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("Bad floatingip request: Port %s does not have any IPv4 address.", portID))
		return false
	}
	fixed := p.fixedIPs[0]
	if c.opts.External.Unrouted {
		neutronError(w, http.StatusNotFound, "ExternalGatewayForFloatingIPNotFound", fmt.Sprintf(
			"External network %s is not reachable from subnet %s.  Therefore, cannot associate Port %s with a Floating IP.", f.networkID, fixed.SubnetID, portID))
		return false
	}
	for _, other := range rs.floatingIPs {
		if other.id != f.id && other.portID == portID && other.fixedIP == fixed.IPAddress && other.networkID == f.networkID {
			neutronError(w, http.StatusConflict, "FloatingIPPortAlreadyAssociated", fmt.Sprintf(
				"Cannot associate floating IP %s (%s) with port %s using fixed IP %s, as that fixed IP already has a floating IP on external network %s.",
				f.address, f.id, portID, fixed.IPAddress, f.networkID))
			return false
		}
	}
	f.portID, f.fixedIP = portID, fixed.IPAddress
	return true
}

// floatingIPOr404 returns the floating IP the path names, or answers
// Neutron's 404 and returns nil. The caller holds c.mu.
func (c *Cloud) floatingIPOr404(w http.ResponseWriter, r *http.Request) *floatingIP {
	f := c.at(r).floatingIPs[r.PathValue("id")]
	if f == nil {
		neutronError(w, http.StatusNotFound, "FloatingIPNotFound", fmt.Sprintf("Floating IP %s could not be found", r.PathValue("id")))
	}
	return f
}

func (c *Cloud) showFloatingIP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.floatingIPOr404(w, r); f != nil {
		writeJSON(w, http.StatusOK, map[string]any{"floatingip": c.floatingIPView(f)})
	}
}

func (c *Cloud) updateFloatingIP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		FloatingIP map[string]json.RawMessage `json:"floatingip"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.FloatingIP == nil {
		neutronError(w, http.StatusBadRequest, "HTTPBadRequest", "Resource body required")
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.floatingIPOr404(w, r)
	if f == nil || !revisionMatches(w, r, f.revision) {
		return
	}
	// No port_id keeps the association, unless the body is empty.
	raw, ok := body.FloatingIP["port_id"]
	var portID *string
	if ok {
		_ = json.Unmarshal(raw, &portID)
	}
	switch {
	case ok && portID != nil && *portID != "":
		if !c.associate(w, c.at(r), f, *portID) {
			return
		}
	case ok || len(body.FloatingIP) == 0:
		f.portID, f.fixedIP = "", ""
	}
	// One transaction: the description changes only with an update that
	// succeeds.
	if d, ok := body.FloatingIP["description"]; ok {
		_ = json.Unmarshal(d, &f.description)
	}
	f.revision++
	writeJSON(w, http.StatusOK, map[string]any{"floatingip": c.floatingIPView(f)})
}

func (c *Cloud) deleteFloatingIP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.floatingIPOr404(w, r); f != nil {
		delete(c.at(r).floatingIPs, f.id)
		w.WriteHeader(http.StatusNoContent)
	}
}

func (c *Cloud) replaceFloatingIPTags(w http.ResponseWriter, r *http.Request) {
	tags, ok := decodeTags(w, r)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.floatingIPOr404(w, r)
	if f == nil {
		return
	}
	f.tags = slices.Clone(tags)
	f.revision++
	writeJSON(w, http.StatusOK, map[string]any{"tags": slices.Clone(f.tags)})
}

// disassociateFloatingIPs is ML2's delete_port hook: the port's floating
// IPs stay, unassociated. Called with c.mu held.
func (rs *regionState) disassociateFloatingIPs(portID string) {
	for _, f := range rs.floatingIPs {
		if f.portID == portID {
			f.portID, f.fixedIP = "", ""
		}
	}
}

// FloatingIP is a snapshot of one floating IP, for tests.
type FloatingIP struct {
	ID, Region, Address, PortID, Description string
	Tags                                     []string
}

// FloatingIPs lists every floating IP, region by region (in
// Options.Regions' order), oldest first.
func (c *Cloud) FloatingIPs() []FloatingIP {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []FloatingIP
	for _, region := range c.opts.Regions {
		for _, f := range c.in(region).sortedFloatingIPs() {
			out = append(out, FloatingIP{ID: f.id, Region: region, Address: f.address, PortID: f.portID, Description: f.description, Tags: slices.Clone(f.tags)})
		}
	}
	return out
}

// revisionMatches enforces an update's "If-Match: revision_number=N"
// (Networking API reference, "Revisions"; standard-attr-revisions): a
// resource whose revision is not N is 412 "Constrained to N, but current
// revision is M" (neutron/services/revisions/revision_plugin.py,
// _enforce_if_match_constraints, RevisionNumberConstraintFailed). Without
// the header every update goes through.
func revisionMatches(w http.ResponseWriter, r *http.Request, current int) bool {
	want, ok := strings.CutPrefix(r.Header.Get("If-Match"), "revision_number=")
	if !ok {
		return true
	}
	if n, err := strconv.Atoi(want); err == nil && n == current {
		return true
	}
	neutronError(w, http.StatusPreconditionFailed, "HTTPPreconditionFailed", fmt.Sprintf("Constrained to %s, but current revision is %d", want, current))
	return false
}
