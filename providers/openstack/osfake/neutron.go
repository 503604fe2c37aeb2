package osfake

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Neutron's security groups, their rules and their tags: what a provider
// that manages a security group calls. It follows the Networking API
// reference, "Security groups (security-groups)", "Security group rules
// (security-group-rules)" and "Standard attributes tag extension"
// (https://docs.openstack.org/api-ref/network/v2/), and the Zed code that
// answers those calls:
//
//   - neutron/db/securitygroups_db.py, create_security_group: a new group
//     gets one egress rule per ethertype (IPv4, IPv6), open to all;
//   - same file, _check_for_duplicate_rules and _rule_to_key: a rule equal
//     to an existing one (direction, ethertype, ports, protocol, remote) is
//     refused with 409 SecurityGroupRuleExists; _validate_ip_prefix: the
//     remote prefix's family must match the ethertype (400
//     SecurityGroupRuleParameterConflict);
//   - neutron/extensions/securitygroup.py, SecurityGroupInUse: a group a
//     port still uses cannot be deleted (409); SecurityGroupNotFound (404);
//   - neutron/extensions/tagging.py: PUT .../tags replaces the tags (each
//     at most 255 characters, unique); Zed takes no tags in a create body
//     for security groups (only ports, tag_ports_during_bulk_creation);
//   - neutron/conf/quota.py: 10 groups and 100 rules per project by default
//     (Options.Quota.SecurityGroups, zero unlimited here).
//
// Error bodies are Neutron's, {"NeutronError": {"type", "message",
// "detail"}} (neutron/api/v2/base.py via neutron_lib's faults). A server's
// port uses the groups the server was created with until the server is
// gone, so "in use" lasts through the server's delete.

// secGroup is one security group.
type secGroup struct {
	// project is the owning project's ID; "" is the token's project.
	project               string
	id, name, description string
	tags                  []string
	rules                 []secRule
	created               time.Time
	revision              int
}

// secRule is one security group rule.
type secRule struct {
	ID             string  `json:"id"`
	SecurityGroup  string  `json:"security_group_id"`
	Direction      string  `json:"direction"`
	Ethertype      string  `json:"ethertype"`
	Protocol       *string `json:"protocol"`
	PortRangeMin   *int    `json:"port_range_min"`
	PortRangeMax   *int    `json:"port_range_max"`
	RemoteIPPrefix *string `json:"remote_ip_prefix"`
	RemoteGroupID  *string `json:"remote_group_id"`
	Description    string  `json:"description"`
}

// key is _rule_to_key's comparison: 0.0.0.0/0 and ::/0 equal no prefix.
func (r secRule) key() string {
	s := func(p *string) string {
		if p == nil || *p == "0.0.0.0/0" || *p == "::/0" {
			return "+"
		}
		return *p
	}
	i := func(p *int) string {
		if p == nil {
			return "+"
		}
		return fmt.Sprint(*p)
	}
	return strings.Join([]string{r.Direction, r.Ethertype, i(r.PortRangeMax), i(r.PortRangeMin), s(r.Protocol), s(r.RemoteGroupID), s(r.RemoteIPPrefix)}, "|")
}

func (c *Cloud) routeNeutron(mux *http.ServeMux) {
	mux.HandleFunc("GET /network/{region}/{$}", c.networkVersions)
	base := "/network/{region}/v2.0"
	for pattern, h := range map[string]http.HandlerFunc{
		"GET /security-groups":              c.listSecGroups,
		"POST /security-groups":             c.createSecGroup,
		"GET /security-groups/{id}":         c.showSecGroup,
		"DELETE /security-groups/{id}":      c.deleteSecGroup,
		"PUT /security-groups/{id}/tags":    c.replaceSecGroupTags,
		"POST /security-group-rules":        c.createSecRule,
		"DELETE /security-group-rules/{id}": c.deleteSecRule,
	} {
		method, path, _ := strings.Cut(pattern, " ")
		mux.Handle(method+" "+base+path, c.neutron(h))
	}
}

// networkVersions is Neutron's version document (200, no token needed;
// neutron/pecan_wsgi/controllers/root.py, RootController.index), which
// clients read to find v2.0 under the catalogue's unversioned endpoint.
func (c *Cloud) networkVersions(w http.ResponseWriter, r *http.Request) {
	self := c.Server.URL + "/network/" + r.PathValue("region") + "/v2.0/"
	writeJSON(w, http.StatusOK, map[string]any{"versions": []any{
		map[string]any{"id": "v2.0", "status": "CURRENT", "links": []any{map[string]any{"rel": "self", "href": self}}},
	}})
}

// neutron wraps a networking handler: token check and region.
func (c *Cloud) neutron(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.authorized(w, r) {
			return
		}
		if !slices.Contains(c.opts.Regions, r.PathValue("region")) {
			neutronError(w, http.StatusNotFound, "HTTPNotFound", "The resource could not be found.")
			return
		}
		c.mu.Lock()
		c.advance(time.Now())
		c.mu.Unlock()
		h(w, r)
	})
}

func neutronError(w http.ResponseWriter, status int, typ, message string) {
	writeJSON(w, status, map[string]any{"NeutronError": map[string]any{"type": typ, "message": message, "detail": ""}})
}

func (c *Cloud) secGroupView(g *secGroup) map[string]any {
	rules := make([]any, len(g.rules))
	for i, r := range g.rules {
		rules[i] = r
	}
	ts := g.created.Format(time.RFC3339)
	return map[string]any{
		"id": g.id, "name": g.name, "description": g.description, "tags": g.tags,
		"project_id": c.groupProject(g), "tenant_id": c.groupProject(g), "stateful": true,
		"security_group_rules": rules, "created_at": ts, "updated_at": ts, "revision_number": g.revision,
	}
}

// groupProject is the ID of the group's project.
func (c *Cloud) groupProject(g *secGroup) string { return cmp.Or(g.project, c.projectID) }

// listSecGroups filters on name, project_id (or its older name
// tenant_id) and tags (every tag of the comma list), as the API
// reference's query parameters say; another project's groups are listed
// only to an admin (Options.Admin).
func (c *Cloud) listSecGroups(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []any{}
	for _, g := range c.at(r).secGroups {
		if n := q.Get("name"); n != "" && g.name != n {
			continue
		}
		if project := cmp.Or(q.Get("project_id"), q.Get("tenant_id")); project != "" && c.groupProject(g) != project {
			continue
		}
		if c.groupProject(g) != c.projectID && !c.opts.Admin {
			continue
		}
		if t := q.Get("tags"); t != "" && !hasAll(g.tags, strings.Split(t, ",")) {
			continue
		}
		out = append(out, c.secGroupView(g))
	}
	writeJSON(w, http.StatusOK, map[string]any{"security_groups": out})
}

func (c *Cloud) createSecGroup(w http.ResponseWriter, r *http.Request) {
	var body struct {
		SG *struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"security_group"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.SG == nil {
		neutronError(w, http.StatusBadRequest, "HTTPBadRequest", "Resource body required")
		return
	}
	if len(body.SG.Name) > 255 || len(body.SG.Description) > 255 {
		neutronError(w, http.StatusBadRequest, "HTTPBadRequest", "Invalid input for name. Reason: too long.")
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rs := c.at(r)
	if q := c.opts.Quota.SecurityGroups; q > 0 && len(rs.secGroups) >= q {
		neutronError(w, http.StatusConflict, "OverQuota", "Quota exceeded for resources: ['security_group'].")
		return
	}
	g := &secGroup{id: newUUID(), name: body.SG.Name, description: body.SG.Description, tags: []string{}, created: time.Now().UTC().Truncate(time.Second)}
	for _, et := range []string{"IPv4", "IPv6"} {
		g.rules = append(g.rules, secRule{ID: newUUID(), SecurityGroup: g.id, Direction: "egress", Ethertype: et})
	}
	rs.secGroups[g.id] = g
	writeJSON(w, http.StatusCreated, map[string]any{"security_group": c.secGroupView(g)})
}

// secGroupOr404 is the group of the path's id in the path's region, or
// answers 404.
func (c *Cloud) secGroupOr404(w http.ResponseWriter, r *http.Request) *secGroup {
	id := r.PathValue("id")
	g := c.at(r).secGroups[id]
	if g == nil {
		neutronError(w, http.StatusNotFound, "SecurityGroupNotFound", fmt.Sprintf("Security group %s does not exist", id))
	}
	return g
}

func (c *Cloud) showSecGroup(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.secGroupOr404(w, r); g != nil {
		writeJSON(w, http.StatusOK, map[string]any{"security_group": c.secGroupView(g)})
	}
}

// deleteSecGroup refuses a group a server's port still uses.
func (c *Cloud) deleteSecGroup(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.secGroupOr404(w, r)
	if g == nil {
		return
	}
	region := r.PathValue("region")
	for _, s := range c.servers {
		if s.region == region && (slices.Contains(s.securityGroups, g.id) || slices.Contains(s.securityGroups, g.name)) {
			neutronError(w, http.StatusConflict, "SecurityGroupInUse", fmt.Sprintf("Security Group %s in use.", g.id))
			return
		}
	}
	for _, p := range c.at(r).ports {
		if slices.Contains(p.securityGroups, g.id) {
			neutronError(w, http.StatusConflict, "SecurityGroupInUse", fmt.Sprintf("Security Group %s in use.", g.id))
			return
		}
	}
	delete(c.at(r).secGroups, g.id)
	w.WriteHeader(http.StatusNoContent)
}

// decodeTags reads a PUT …/tags body (neutron/extensions/tagging.py
// update_all: a list of unique strings of at most 255 characters), or
// answers Neutron's 400 and returns false. Every taggable resource takes
// the same body.
func decodeTags(w http.ResponseWriter, r *http.Request) ([]string, bool) {
	var body struct {
		Tags []string `json:"tags"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Tags == nil {
		neutronError(w, http.StatusBadRequest, "InvalidInput", "Invalid input for operation: Invalid tags body.")
		return nil, false
	}
	for i, t := range body.Tags {
		if t == "" || len(t) > 255 || slices.Contains(body.Tags[:i], t) {
			neutronError(w, http.StatusBadRequest, "InvalidInput", fmt.Sprintf("Invalid input for operation: '%s' is not a valid list of unique strings.", t))
			return nil, false
		}
	}
	return body.Tags, true
}

func (c *Cloud) replaceSecGroupTags(w http.ResponseWriter, r *http.Request) {
	tags, ok := decodeTags(w, r)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.secGroupOr404(w, r)
	if g == nil {
		return
	}
	g.tags = slices.Clone(tags)
	g.revision++
	writeJSON(w, http.StatusOK, map[string]any{"tags": g.tags})
}

func (c *Cloud) createSecRule(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Rule *secRule `json:"security_group_rule"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Rule == nil {
		neutronError(w, http.StatusBadRequest, "HTTPBadRequest", "Resource body required")
		return
	}
	rule := *body.Rule
	if rule.Ethertype == "" {
		rule.Ethertype = "IPv4"
	}
	if rule.Direction != "ingress" && rule.Direction != "egress" {
		neutronError(w, http.StatusBadRequest, "HTTPBadRequest", fmt.Sprintf("Invalid input for direction. Reason: %s is not in valid_values.", rule.Direction))
		return
	}
	if rule.RemoteIPPrefix != nil {
		p, err := netip.ParsePrefix(*rule.RemoteIPPrefix)
		if err != nil {
			neutronError(w, http.StatusBadRequest, "HTTPBadRequest", fmt.Sprintf("Invalid input for remote_ip_prefix. Reason: '%s' is not a valid IP subnet.", *rule.RemoteIPPrefix))
			return
		}
		if want := map[bool]string{true: "IPv4", false: "IPv6"}[p.Addr().Is4()]; want != rule.Ethertype {
			neutronError(w, http.StatusBadRequest, "SecurityGroupRuleParameterConflict", fmt.Sprintf("Conflicting value ethertype %s for CIDR %s", rule.Ethertype, *rule.RemoteIPPrefix))
			return
		}
	}
	if (rule.PortRangeMin == nil) != (rule.PortRangeMax == nil) || (rule.PortRangeMin != nil && *rule.PortRangeMin > *rule.PortRangeMax) {
		neutronError(w, http.StatusBadRequest, "SecurityGroupInvalidPortRange", "For TCP/UDP protocols, port_range_min must be <= port_range_max")
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rs := c.at(r)
	g := rs.secGroups[rule.SecurityGroup]
	if g == nil {
		neutronError(w, http.StatusNotFound, "SecurityGroupNotFound", fmt.Sprintf("Security group %s does not exist", rule.SecurityGroup))
		return
	}
	for _, have := range g.rules {
		if have.key() == rule.key() {
			neutronError(w, http.StatusConflict, "SecurityGroupRuleExists", fmt.Sprintf("Security group rule already exists. Rule id is %s.", have.ID))
			return
		}
	}
	if q := c.opts.Quota.SecurityGroupRules; q > 0 && rs.ruleCount() >= q {
		neutronError(w, http.StatusConflict, "OverQuota", "Quota exceeded for resources: ['security_group_rule'].")
		return
	}
	rule.ID = newUUID()
	g.rules = append(g.rules, rule)
	g.revision++
	writeJSON(w, http.StatusCreated, map[string]any{"security_group_rule": rule})
}

// ruleCount counts the project's rules in the region. Called with c.mu
// held.
func (rs *regionState) ruleCount() int {
	n := 0
	for _, g := range rs.secGroups {
		n += len(g.rules)
	}
	return n
}

func (c *Cloud) deleteSecRule(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.at(r).secGroups {
		for i, rule := range g.rules {
			if rule.ID == id {
				g.rules = slices.Delete(g.rules, i, i+1)
				g.revision++
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
	}
	neutronError(w, http.StatusNotFound, "SecurityGroupRuleNotFound", fmt.Sprintf("Security group rule %s does not exist", id))
}

// secGroupKnown says whether Nova would resolve ref, a name or an ID, to
// one of the project's groups (nova/network/neutron.py,
// _process_security_groups: a name matching two groups is refused; an
// unknown one is SecurityGroupNotFound, 400 on create). "default" always
// exists. Called with c.mu held.
func (c *Cloud) secGroupKnown(rs *regionState, ref string) (ok bool, ambiguous bool) {
	if ref == "default" {
		return true, false
	}
	names := 0
	for _, g := range rs.secGroups {
		if c.groupProject(g) != c.projectID {
			continue // Nova lists the instance's project's groups only
		}
		if g.name == ref {
			names++
		}
		if g.id == ref {
			ok = true
		}
	}
	return ok || names == 1, names > 1
}

// SecurityGroup is a snapshot of one security group, for tests.
type SecurityGroup struct {
	ID, Region, Name, Description string
	Tags                          []string
	// Ingress are the ingress rules as "<ethertype> <protocol> <min>-<max> <remote prefix>".
	Ingress []string
}

// SecurityGroups returns every security group of every region.
func (c *Cloud) SecurityGroups() []SecurityGroup {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []SecurityGroup
	for region, rs := range c.regions {
		for _, g := range rs.secGroups {
			out = append(out, securityGroup(region, g))
		}
	}
	slices.SortFunc(out, func(a, b SecurityGroup) int { return strings.Compare(a.Name+a.ID, b.Name+b.ID) })
	return out
}

// securityGroup is g's snapshot.
func securityGroup(region string, g *secGroup) SecurityGroup {
	sg := SecurityGroup{ID: g.id, Region: region, Name: g.name, Description: g.description, Tags: slices.Clone(g.tags)}
	for _, r := range g.rules {
		if r.Direction != "ingress" {
			continue
		}
		deref := func(p *string) string {
			if p == nil {
				return "any"
			}
			return *p
		}
		ports := "any"
		if r.PortRangeMin != nil {
			ports = fmt.Sprintf("%d-%d", *r.PortRangeMin, *r.PortRangeMax)
		}
		sg.Ingress = append(sg.Ingress, fmt.Sprintf("%s %s %s %s", r.Ethertype, deref(r.Protocol), ports, deref(r.RemoteIPPrefix)))
	}
	slices.Sort(sg.Ingress)
	return sg
}

// AddSecurityGroup makes a group as a person would (no tags, no rules but
// the default egress ones) in the first region and returns its ID.
func (c *Cloud) AddSecurityGroup(name, description string) string {
	return c.AddProjectSecurityGroup("", name, description)
}

// AddProjectSecurityGroup makes a group as AddSecurityGroup does, in the
// project of that ID ("" is the token's).
func (c *Cloud) AddProjectSecurityGroup(project, name, description string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := &secGroup{project: project, id: newUUID(), name: name, description: description, tags: []string{}, created: time.Now().UTC().Truncate(time.Second)}
	c.in(c.opts.Regions[0]).secGroups[g.id] = g
	return g.id
}

// portSecurityGroups is a server's "security_groups" as Nova shows it on
// show and list: read from the groups of the server's Neutron ports, by
// name (nova/api/openstack/compute/views/servers.py _add_security_grps,
// nova/network/security_group_api.py
// get_instances_security_groups_bindings), and absent while it has no
// port, as during BUILD ("if groups:"). The real cloud showed it: a
// server created with the managed group's ID listed no security_groups
// while building. The fake's port exists once the server has an address.
// Called with c.mu held.
func (c *Cloud) portSecurityGroups(s *server) []any {
	if len(s.addresses) == 0 {
		return nil
	}
	var out []any
	for _, ref := range s.securityGroups {
		name := ref
		if g := c.in(s.region).secGroups[ref]; g != nil {
			name = g.name
		}
		out = append(out, map[string]any{"name": name})
	}
	return out
}
