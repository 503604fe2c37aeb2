package osfake

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Nova's server groups, as the Compute API reference ("Server groups
// (os-server-groups)", https://docs.openstack.org/api-ref/compute/#server-groups-os-server-groups)
// and the Zed code say (nova/api/openstack/compute/server_groups.py and
// schemas/server_groups.py):
//
//   - create answers 200; before 2.64 the body has "policies", a list of
//     exactly one of affinity, anti-affinity (and, from 2.15,
//     soft-affinity, soft-anti-affinity); from 2.64 a "policy" string
//     instead, and "policies" is refused (additionalProperties: False);
//     over the server_groups quota (10 by default, nova/conf/quota.py) it
//     is 403 "Quota exceeded, too many server groups.";
//   - the views show "policies" and "metadata" before 2.64, "policy" and
//     "rules" from it; "members" lists the members not deleted
//     (_get_not_deleted);
//   - delete answers 204 whatever the members (sg.destroy(), no check),
//     404 for an unknown group;
//   - a server create's os:scheduler_hints "group" must be a UUID
//     (schemas/servers.py, _hints) of an existing group, else 400
//     InstanceGroupNotFound "Instance group %s could not be found."
//     (servers.py create maps it to HTTPBadRequest).
//
// The fake has no hosts, so no policy is ever violated.

type serverGroup struct {
	id, name, policy string
	// seq is the group's order of creation, the API database's id, in
	// which Nova lists groups (InstanceGroupList._get_from_db, no order).
	seq int
}

func (c *Cloud) routeServerGroups(mux *http.ServeMux) {
	base := "/compute/{region}/v2.1"
	for pattern, h := range map[string]novaHandler{
		"GET /os-server-groups":         c.listServerGroups,
		"POST /os-server-groups":        c.createServerGroup,
		"GET /os-server-groups/{id}":    c.showServerGroup,
		"DELETE /os-server-groups/{id}": c.deleteServerGroup,
	} {
		method, path, _ := strings.Cut(pattern, " ")
		mux.Handle(method+" "+base+path, c.nova(h))
	}
}

// serverGroupView is the group as microversion v shows it. Called with
// c.mu held.
func (c *Cloud) serverGroupView(g *serverGroup, v microversion) map[string]any {
	members := []string{}
	for _, s := range c.servers {
		if s.group == g.id {
			members = append(members, s.id)
		}
	}
	slices.Sort(members)
	out := map[string]any{"id": g.id, "name": g.name, "members": members}
	if v.atLeast(64) {
		out["policy"], out["rules"] = g.policy, map[string]any{}
	} else {
		out["policies"], out["metadata"] = []string{g.policy}, map[string]any{}
	}
	if v.atLeast(13) {
		out["project_id"], out["user_id"] = c.projectID, c.userID
	}
	return out
}

// listServerGroups lists the project's groups one page at a time, as
// nova/api/openstack/common.py limited does: from offset (default 0), at
// most min(limit, [api]max_limit) (a limit of 0 or none is max_limit), and
// no link to a next page; a negative or non-integer offset or limit is
// 400 (get_pagination_params).
func (c *Cloud) listServerGroups(w http.ResponseWriter, r *http.Request, v microversion, region string) {
	page := map[string]int{"offset": 0, "limit": 0}
	for name := range page {
		if raw := r.URL.Query().Get(name); raw != "" {
			n, err := strconv.Atoi(raw)
			if err != nil || n < 0 {
				novaError(w, http.StatusBadRequest, fmt.Sprintf("%s param must be an integer", name))
				return
			}
			page[name] = n
		}
	}
	limit := c.opts.MaxLimit
	if page["limit"] > 0 {
		limit = min(limit, page["limit"])
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	groups := slices.SortedFunc(maps.Values(c.in(region).serverGroups), func(a, b *serverGroup) int { return a.seq - b.seq })
	out := []any{}
	for _, g := range groups[min(page["offset"], len(groups)):min(page["offset"]+limit, len(groups))] {
		out = append(out, c.serverGroupView(g, v))
	}
	writeJSON(w, http.StatusOK, map[string]any{"server_groups": out})
}

func (c *Cloud) createServerGroup(w http.ResponseWriter, r *http.Request, v microversion, region string) {
	var body struct {
		SG map[string]json.RawMessage `json:"server_group"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.SG == nil {
		invalidInput(w, "root", "Value: {}. 'server_group' is a required property")
		return
	}
	allowed := []string{"name", "policies"}
	if v.atLeast(64) {
		allowed = []string{"name", "policy", "rules"}
	}
	for _, k := range slices.Sorted(mapsKeys(body.SG)) {
		if !slices.Contains(allowed, k) {
			invalidInput(w, "server_group", fmt.Sprintf("Value: {...}. Additional properties are not allowed ('%s' was unexpected)", k))
			return
		}
	}
	var sg struct {
		Name     string   `json:"name"`
		Policies []string `json:"policies"`
		Policy   string   `json:"policy"`
	}
	raw, _ := json.Marshal(body.SG)
	_ = json.Unmarshal(raw, &sg)
	valid := []string{"affinity", "anti-affinity"}
	if v.atLeast(15) {
		valid = append(valid, "soft-affinity", "soft-anti-affinity")
	}
	policy := sg.Policy
	if !v.atLeast(64) {
		if len(sg.Policies) != 1 {
			invalidInput(w, "policies", fmt.Sprintf("Value: %v. %v is not valid under any of the given schemas", sg.Policies, sg.Policies))
			return
		}
		policy = sg.Policies[0]
	}
	switch {
	case len(sg.Name) < 1 || len(sg.Name) > 255 || strings.TrimSpace(sg.Name) != sg.Name:
		invalidInput(w, "name", fmt.Sprintf("Value: %s. '%s' does not match", sg.Name, sg.Name))
		return
	case !slices.Contains(valid, policy):
		invalidInput(w, "policy", fmt.Sprintf("Value: %s. '%s' is not one of %q", policy, policy, valid))
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if q := c.opts.Quota.ServerGroups; q > 0 && len(c.in(region).serverGroups) >= q {
		novaError(w, http.StatusForbidden, "Quota exceeded, too many server groups.")
		return
	}
	g := c.addServerGroup(region, sg.Name, policy)
	writeJSON(w, http.StatusOK, map[string]any{"server_group": c.serverGroupView(g, v)})
}

func (c *Cloud) showServerGroup(w http.ResponseWriter, r *http.Request, v microversion, region string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.in(region).serverGroups[r.PathValue("id")]
	if g == nil {
		novaError(w, http.StatusNotFound, fmt.Sprintf("Instance group %s could not be found.", r.PathValue("id")))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"server_group": c.serverGroupView(g, v)})
}

func (c *Cloud) deleteServerGroup(w http.ResponseWriter, r *http.Request, _ microversion, region string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := r.PathValue("id")
	groups := c.in(region).serverGroups
	if groups[id] == nil {
		novaError(w, http.StatusNotFound, fmt.Sprintf("Instance group %s could not be found.", id))
		return
	}
	delete(groups, id)
	w.WriteHeader(http.StatusNoContent)
}

// addServerGroup makes a group in the region. Called with c.mu held.
func (c *Cloud) addServerGroup(region, name, policy string) *serverGroup {
	c.groupSeq++
	g := &serverGroup{id: newUUID(), name: name, policy: policy, seq: c.groupSeq}
	c.in(region).serverGroups[g.id] = g
	return g
}

// AddServerGroup makes a server group as a person would, in the first
// region, and returns its ID.
func (c *Cloud) AddServerGroup(name, policy string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addServerGroup(c.opts.Regions[0], name, policy).id
}

// ServerGroup is a snapshot of one server group, for tests.
type ServerGroup struct {
	ID, Region, Name, Policy string
	Members                  []string
}

// ServerGroups returns every server group, region by region (in
// Options.Regions' order), by ID.
func (c *Cloud) ServerGroups() []ServerGroup {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []ServerGroup
	for _, region := range c.opts.Regions {
		groups := c.in(region).serverGroups
		for _, id := range slices.Sorted(mapsKeys(groups)) {
			g := groups[id]
			sg := ServerGroup{ID: g.id, Region: region, Name: g.name, Policy: g.policy}
			for _, s := range c.servers {
				if s.group == g.id {
					sg.Members = append(sg.Members, s.id)
				}
			}
			out = append(out, sg)
		}
	}
	return out
}

// createRefsExist checks a server create's security groups and group hint
// as Nova does before it accepts the server: each security group must
// resolve to exactly one of the project's (nova/network/neutron.py,
// _process_security_groups: SecurityGroupNotFound, NoUniqueMatch), the
// group must exist (InstanceGroupNotFound); both are 400
// (nova/api/openstack/compute/servers.py, create). Both are the
// region's. Called with c.mu held.
func (c *Cloud) createRefsExist(w http.ResponseWriter, rs *regionState, secGroups []struct{ Name string }, group *string) bool {
	for _, sg := range secGroups {
		ok, ambiguous := c.secGroupKnown(rs, sg.Name)
		switch {
		case ambiguous:
			novaError(w, http.StatusConflict, fmt.Sprintf("Multiple security groups found matching '%s'. Use an ID to be more specific.", sg.Name))
			return false
		case !ok:
			novaError(w, http.StatusBadRequest, fmt.Sprintf("Security group %s not found.", sg.Name))
			return false
		}
	}
	if group != nil && rs.serverGroups[*group] == nil {
		novaError(w, http.StatusBadRequest, fmt.Sprintf("Instance group %s could not be found.", *group))
		return false
	}
	return true
}

// groupHint is the "group" of a create's os:scheduler_hints, or nil.
func groupHint(raw json.RawMessage) *string {
	var hints struct {
		Group *string `json:"group"`
	}
	_ = json.Unmarshal(raw, &hints)
	return hints.Group
}
