package osfake

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// server is one Nova server.
type server struct {
	id, name, region, zone string
	flavor                 Flavor
	imageID                string
	status, vmState        string
	taskState              string // "" is null
	powerState             int
	tags                   []string
	metadata               map[string]string
	userData               string // base64, as sent
	securityGroups         []string
	addresses              []string
	created, updated       time.Time
	buildDone              time.Time // when BUILD ends; zero while held
	fail                   string    // the fault message a failing build ends with
	faultAt                time.Time
	held                   bool      // the build is held (HoldBuild)
	schedulingHeld         bool      // the scheduler has not answered (HoldScheduling)
	destroyAt              time.Time // when the conductor destroys an instance whose build request was deleted
	locked                 bool      // Nova's lock (LockServer)
	deleteDone             time.Time // when a delete ends; zero while held
	deleting               bool
	// deleteWrittenOver: the build's block-device save wrote over the
	// delete's "deleting" (BuildOverDelete); the build's last save then
	// succeeds, and the delete ends only after it.
	deleteWrittenOver bool
	launched          bool      // has been ACTIVE (launched_at is set)
	reclaimAt         time.Time // when a SOFT_DELETED server is reclaimed
	configDrive       bool
	group             string   // the server group it was created in
	ports             []string // the ports the create passed in (ports.go)
	actions           []action // its instance actions, oldest first (actions.go)
	rescheduled       bool     // its build was rescheduled (RescheduleBuild): no build request stands
}

// microversion is a compute API version, major.minor.
type microversion struct{ major, minor int }

func parseVersion(s string) (microversion, bool) {
	maj, min, ok := strings.Cut(strings.TrimSpace(s), ".")
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	return microversion{a, b}, ok && err1 == nil && err2 == nil
}

func (v microversion) atLeast(minor int) bool { return v.major > 2 || v.minor >= minor }
func (v microversion) String() string         { return fmt.Sprintf("%d.%d", v.major, v.minor) }

// The statuses of Nova's API (Compute API guide, Server concepts).
const (
	statusBuild       = "BUILD"
	statusActive      = "ACTIVE"
	statusError       = "ERROR"
	statusSoftDeleted = "SOFT_DELETED"
)

// NoValidHost is the fault message of a server the scheduler could not
// place (nova.exception.NoValidHost with the filter scheduler's reason).
const NoValidHost = "No valid host was found. There are not enough hosts available."

type novaHandler func(w http.ResponseWriter, r *http.Request, v microversion, region string)

func (c *Cloud) routeNova(mux *http.ServeMux) {
	base := "/compute/{region}/v2.1"
	for pattern, h := range map[string]novaHandler{
		"POST /servers":                         c.createServer,
		"GET /servers":                          c.listServers(false),
		"GET /servers/detail":                   c.listServers(true),
		"GET /servers/{id}":                     c.showServer,
		"DELETE /servers/{id}":                  c.deleteServer,
		"POST /servers/{id}/action":             c.serverAction,
		"GET /servers/{id}/tags":                c.serverTags,
		"PUT /servers/{id}/tags":                c.serverTags,
		"GET /servers/{id}/tags/{tag}":          c.serverTag,
		"PUT /servers/{id}/tags/{tag}":          c.serverTag,
		"DELETE /servers/{id}/tags/{tag}":       c.serverTag,
		"GET /servers/{id}/metadata":            c.serverMetadata,
		"POST /servers/{id}/metadata":           c.serverMetadata,
		"PUT /servers/{id}/metadata":            c.serverMetadata,
		"GET /flavors":                          c.listFlavors(false),
		"GET /flavors/detail":                   c.listFlavors(true),
		"GET /flavors/{id}":                     c.showFlavor,
		"GET /limits":                           c.limits,
		"GET /os-availability-zone":             c.zones,
		"GET /os-availability-zone/detail":      c.zones,
		"GET /servers/{id}/os-instance-actions": c.instanceActions,
	} {
		method, path, _ := strings.Cut(pattern, " ")
		mux.Handle(method+" "+base+path, c.nova(h))
	}
}

// nova wraps a compute handler: token check, region, microversion
// negotiation and its response headers.
func (c *Cloud) nova(h novaHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.authorized(w, r) {
			return
		}
		region := r.PathValue("region")
		if !slices.Contains(c.opts.Regions, region) {
			novaError(w, http.StatusNotFound, "The resource could not be found.")
			return
		}
		maxV, _ := parseVersion(c.opts.MaxMicroversion)
		v := microversion{2, 1}
		asked := r.Header.Get("X-OpenStack-Nova-API-Version")
		if h := r.Header.Get("OpenStack-API-Version"); strings.HasPrefix(h, "compute ") {
			asked = strings.TrimPrefix(h, "compute ")
		}
		switch asked {
		case "":
		case "latest":
			v = maxV
		default:
			got, ok := parseVersion(asked)
			if !ok {
				novaError(w, http.StatusBadRequest, fmt.Sprintf("API Version String %s is of invalid format. Must be of format MajorNum.MinorNum.", asked))
				return
			}
			if got.major != 2 || got.minor < 1 || (got.major == maxV.major && got.minor > maxV.minor) {
				novaError(w, http.StatusNotAcceptable, fmt.Sprintf("Version %s is not supported by the API. Minimum is 2.1 and maximum is %s.", asked, maxV))
				return
			}
			v = got
		}
		w.Header().Set("OpenStack-API-Version", "compute "+v.String())
		w.Header().Set("X-OpenStack-Nova-API-Version", v.String())
		w.Header().Set("Vary", "OpenStack-API-Version, X-OpenStack-Nova-API-Version")
		c.mu.Lock()
		c.advance(time.Now())
		c.mu.Unlock()
		h(w, r, v, region)
	})
}

// advance moves every server along as time passed: builds end, deletes
// finish. Called with c.mu held.
func (c *Cloud) advance(now time.Time) {
	for id, s := range c.unplaced {
		if !s.schedulingHeld {
			// The scheduler answered: the conductor writes the instance to
			// its cell and maps it, then finds the build request gone and
			// destroys it (nova/conductor/manager.py,
			// schedule_and_build_instances, _delete_build_request). In
			// between the API reads it, BUILD in task_state scheduling;
			// DeleteDelay is that while.
			delete(c.unplaced, id)
			s.destroyAt = now.Add(c.opts.DeleteDelay)
			c.servers[id] = s
		}
	}
	for id, s := range c.servers {
		if !s.destroyAt.IsZero() {
			if !now.Before(s.destroyAt) {
				c.unbindPorts(s)
				delete(c.servers, id)
			}
			continue
		}
		reclaimed := s.status == statusSoftDeleted && !s.reclaimAt.IsZero() && !now.Before(s.reclaimAt)
		if reclaimed || (s.deleting && !s.deleteDone.IsZero() && !now.Before(s.deleteDone)) {
			c.unbindPorts(s)
			delete(c.servers, id)
			continue
		}
		if s.status == statusBuild && s.taskState == "scheduling" && !s.schedulingHeld && !s.rescheduled {
			s.taskState = "spawning"
			c.bindPorts(s)
		}
		if s.status == statusBuild && !s.buildDone.IsZero() && !now.Before(s.buildDone) && !s.held && !s.schedulingHeld && !s.rescheduled {
			c.finishBuild(s, now)
		}
	}
}

// finishBuild ends a build: ACTIVE with an address, or ERROR with the
// fault the build was set to fail with.
func (c *Cloud) finishBuild(s *server, now time.Time) {
	if s.deleting && s.fail == "" && !s.deleteWrittenOver {
		c.cutShort(s, now)
		return
	}
	c.bindPorts(s)
	s.updated, s.taskState = now, ""
	if s.fail != "" {
		s.status, s.vmState, s.faultAt = statusError, "error", now
		return
	}
	s.status, s.vmState, s.powerState, s.launched = statusActive, "active", 1, true
	switch {
	case len(s.addresses) > 0:
	case len(s.ports) > 0:
		// A port passed in: its fixed IPs are the server's addresses.
		s.addresses = c.portAddresses(s)
	default:
		// The port Nova makes gets an address no port holds.
		for tries := 0; tries < 240; tries++ {
			c.ipSeq++
			a := fmt.Sprintf("%s.%d", c.opts.Network.Prefix, 10+c.ipSeq%240)
			if !c.addressTaken(s.region, a) {
				s.addresses = []string{a}
				break
			}
		}
	}
}

// cutShort ends a build its delete came during, as Nova's compute does:
// the build sets the instance ACTIVE, task_state null and launched in
// memory, and its save, which expects task_state spawning, finds deleting
// and fails (nova/compute/manager.py _build_and_run_instance,
// _update_instance_after_spawn, save(expected_task_state=SPAWNING):
// UnexpectedDeletingTaskStateError). The build then releases its network
// and saves with no expected task state, writing what it had set over
// the delete's "deleting" (_do_build_and_run_instance,
// _cleanup_allocated_networks: instance.save()). The server reads ACTIVE,
// no task, no address, until the terminate, queued behind the build's
// instance lock, destroys it (DeleteDelay). The lane's nova-compute log
// shows it: the spawn, "deallocate network", then "Terminating instance".
// Called with c.mu held.
func (c *Cloud) cutShort(s *server, now time.Time) {
	c.unbindPorts(s)
	s.updated, s.taskState, s.addresses = now, "", nil
	s.status, s.vmState, s.powerState, s.launched = statusActive, "active", 1, true
}

func invalidInput(w http.ResponseWriter, field, detail string) {
	novaError(w, http.StatusBadRequest, fmt.Sprintf("Invalid input for field/attribute %s. %s", field, detail))
}

func (c *Cloud) createServer(w http.ResponseWriter, r *http.Request, v microversion, region string) {
	var req map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req == nil {
		novaError(w, http.StatusBadRequest, "The request body is invalid.")
		return
	}
	if msg := checkCreate(req, v); msg != "" {
		novaError(w, http.StatusBadRequest, msg)
		return
	}
	var body struct {
		Name           string                  `json:"name"`
		ImageRef       string                  `json:"imageRef"`
		FlavorRef      string                  `json:"flavorRef"`
		Networks       json.RawMessage         `json:"networks"`
		SecurityGroups []struct{ Name string } `json:"security_groups"`
		UserData       *string                 `json:"user_data"`
		Zone           string                  `json:"availability_zone"`
		Metadata       map[string]string       `json:"metadata"`
		Tags           []string                `json:"tags"`
		ConfigDrive    *bool                   `json:"config_drive"`
	}
	if err := json.Unmarshal(req["server"], &body); err != nil {
		novaError(w, http.StatusBadRequest, "Invalid input for field/attribute server. "+err.Error())
		return
	}
	if len(body.Metadata) > 128 {
		// The metadata_items quota (nova/compute/api.py
		// _check_metadata_properties_quota: MetadataLimitExceeded, an
		// OverQuota, which servers.py create answers with 403).
		novaError(w, http.StatusForbidden, "Maximum number of metadata items exceeds 128")
		return
	}
	if body.Zone != "" && !slices.Contains(c.opts.Zones, body.Zone) {
		novaError(w, http.StatusBadRequest, "The requested availability zone is not available")
		return
	}
	// servers.py create: FlavorNotFound and ImageNotActive are 400 with
	// their own texts (nova/exception.py), ImageNotFound is 400 "Can not
	// find requested image".
	flavor, ok := c.flavor(body.FlavorRef)
	if !ok {
		novaError(w, http.StatusBadRequest, fmt.Sprintf("Flavor %s could not be found.", body.FlavorRef))
		return
	}
	if img, ok := c.image(body.ImageRef); !ok {
		novaError(w, http.StatusBadRequest, "Can not find requested image")
		return
	} else if img.Status != "active" {
		novaError(w, http.StatusBadRequest, fmt.Sprintf("Image %s is not active.", img.ID))
		return
	}
	var nets []struct {
		UUID string `json:"uuid"`
		Port string `json:"port"`
	}
	if len(body.Networks) > 0 && string(body.Networks) != `"auto"` && string(body.Networks) != `"none"` {
		if err := json.Unmarshal(body.Networks, &nets); err != nil {
			invalidInput(w, "networks", "Value: "+string(body.Networks)+". is not of type 'array'")
			return
		}
		for _, n := range nets {
			if n.Port != "" && n.UUID == "" {
				continue
			}
			if n.UUID != c.opts.Network.ID {
				novaError(w, http.StatusBadRequest, fmt.Sprintf("Network %s could not be found.", n.UUID))
				return
			}
		}
	}
	now := time.Now().UTC()
	c.mu.Lock()
	defer c.mu.Unlock()
	group := groupHint(req["os:scheduler_hints"])
	if !c.createRefsExist(w, c.in(region), body.SecurityGroups, group) {
		return
	}
	if msg := c.overQuota(flavor, region); msg != "" {
		novaError(w, http.StatusForbidden, msg)
		return
	}
	s := &server{
		id: newUUID(), name: body.Name, region: region, zone: body.Zone, flavor: flavor, imageID: body.ImageRef,
		status: statusBuild, vmState: "building", taskState: "scheduling", tags: body.Tags, metadata: body.Metadata,
		created: now.Truncate(time.Second), updated: now, fail: c.buildFail,
	}
	c.buildFail = ""
	if s.zone == "" {
		s.zone = c.opts.Zones[0]
	}
	if s.metadata == nil {
		s.metadata = map[string]string{}
	}
	if s.tags == nil {
		s.tags = []string{}
	}
	if body.UserData != nil {
		s.userData = *body.UserData
	}
	s.configDrive = body.ConfigDrive != nil && *body.ConfigDrive
	if group != nil {
		s.group = *group
	}
	var portIDs []string
	for _, n := range nets {
		if n.Port != "" {
			portIDs = append(portIDs, n.Port)
		}
	}
	if len(portIDs) > 0 {
		// A port passed in keeps its own groups; those of the create
		// apply to ports Nova makes (nova/network/neutron.py
		// _create_ports_for_instance).
		if !c.takePorts(w, s, portIDs) {
			return
		}
	} else {
		for _, sg := range body.SecurityGroups {
			s.securityGroups = append(s.securityGroups, sg.Name)
		}
	}
	if len(s.securityGroups) == 0 {
		s.securityGroups = []string{"default"}
	}
	s.schedulingHeld = c.opts.HoldScheduling
	if !c.opts.HoldBuilds {
		s.buildDone = now.Add(c.opts.BuildDelay)
	}
	s.record(actionCreate, now)
	c.servers[s.id] = s
	self := c.Server.URL + "/compute/" + region + "/v2.1/servers/" + s.id
	w.Header().Set("Location", self)
	sgs := make([]any, len(s.securityGroups))
	for i, n := range s.securityGroups {
		sgs[i] = map[string]any{"name": n}
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"server": map[string]any{
		"id": s.id, "links": c.links("servers", region, s.id), "OS-DCF:diskConfig": "MANUAL",
		"security_groups": sgs, "adminPass": hexID()[:12],
	}})
}

// usage is what the project uses in a region (each region's Nova keeps
// its own quota). Called with c.mu held.
func (c *Cloud) usage(region string) Quota {
	used := Quota{}
	for _, s := range c.servers {
		if !s.deleting && s.region == region {
			used.Instances++
			used.Cores += s.flavor.VCPUs
			used.RAM += s.flavor.RAM
		}
	}
	return used
}

// overQuota returns TooManyInstances' message when one more server of
// flavor exceeds the project's quota in the region (403 from POST
// /servers). Called with c.mu held.
func (c *Cloud) overQuota(f Flavor, region string) string {
	q := c.opts.Quota
	used := c.usage(region)
	for _, chk := range []struct {
		name             string
		req, used, limit int
	}{{"instances", 1, used.Instances, q.Instances}, {"cores", f.VCPUs, used.Cores, q.Cores}, {"ram", f.RAM, used.RAM, q.RAM}} {
		if chk.limit > 0 && chk.used+chk.req > chk.limit {
			return fmt.Sprintf("Quota exceeded for %s: Requested %d, but already used %d of %d %s", chk.name, chk.req, chk.used, chk.limit, chk.name)
		}
	}
	return ""
}

func (c *Cloud) links(kind, region, id string) []any {
	return []any{
		map[string]any{"rel": "self", "href": c.Server.URL + "/compute/" + region + "/v2.1/" + kind + "/" + id},
		map[string]any{"rel": "bookmark", "href": c.Server.URL + "/compute/" + region + "/" + kind + "/" + id},
	}
}

// view is a server as GET /servers/{id} shows it at microversion v.
func (c *Cloud) view(s *server, v microversion) map[string]any {
	var flavor any = map[string]any{"id": s.flavor.ID, "links": c.links("flavors", s.region, s.flavor.ID)[1:]}
	if v.atLeast(47) {
		flavor = map[string]any{"vcpus": s.flavor.VCPUs, "ram": s.flavor.RAM, "disk": s.flavor.Disk, "ephemeral": 0, "swap": 0, "original_name": s.flavor.Name, "extra_specs": map[string]any{}}
	}
	addrs := []any{}
	for i, a := range s.addresses {
		version := 4
		if ip := net.ParseIP(a); ip != nil && ip.To4() == nil {
			version = 6
		}
		addrs = append(addrs, map[string]any{"version": version, "addr": a, "OS-EXT-IPS:type": "fixed", "OS-EXT-IPS-MAC:mac_addr": fmt.Sprintf("fa:16:3e:00:00:%02x", i)})
	}
	addresses := map[string]any{}
	if len(addrs) > 0 {
		addresses[c.opts.Network.Name] = addrs
	}
	var task any
	if s.taskState != "" {
		task = s.taskState
	}
	sgs := c.portSecurityGroups(s)
	var launched any
	if s.status != statusBuild && s.fail == "" {
		launched = s.created.Format("2006-01-02T15:04:05.000000")
	}
	out := map[string]any{
		"id": s.id, "name": s.name, "status": s.status, "tenant_id": c.projectID, "user_id": c.userID,
		"metadata": s.metadata, "hostId": "", "image": map[string]any{"id": s.imageID, "links": c.links("images", s.region, s.imageID)[1:]},
		"flavor": flavor, "created": s.created.Format(time.RFC3339), "updated": s.updated.Format(time.RFC3339),
		"addresses": addresses, "accessIPv4": "", "accessIPv6": "", "links": c.links("servers", s.region, s.id),
		"OS-DCF:diskConfig": "MANUAL", "progress": 0, "OS-EXT-AZ:availability_zone": s.zone, "config_drive": map[bool]string{true: "True"}[s.configDrive],
		"key_name": nil, "OS-SRV-USG:launched_at": launched, "OS-SRV-USG:terminated_at": nil, "security_groups": sgs,
		"OS-EXT-STS:task_state": task, "OS-EXT-STS:vm_state": s.vmState, "OS-EXT-STS:power_state": s.powerState,
		"os-extended-volumes:volumes_attached": []any{},
	}
	if s.status == statusActive || s.status == statusError {
		out["hostId"] = hexID()[:28]
	}
	if sgs == nil {
		delete(out, "security_groups")
	}
	if v.atLeast(9) {
		out["locked"] = s.locked
	}
	if v.atLeast(19) {
		out["description"] = nil
	}
	if v.atLeast(26) {
		out["tags"] = s.tags
	}
	if s.status == statusError && s.fail != "" {
		// Details are shown to admins only for code 500 faults.
		out["fault"] = map[string]any{"code": 500, "created": s.faultAt.Format(time.RFC3339), "message": s.fail}
	}
	return out
}

// lookup finds a server of the region, or answers 404.
func (c *Cloud) lookup(w http.ResponseWriter, r *http.Request, region string) *server {
	id := r.PathValue("id")
	s, ok := c.servers[id]
	if !ok || s.region != region {
		novaError(w, http.StatusNotFound, fmt.Sprintf("Instance %s could not be found.", id))
		return nil
	}
	return s
}

func (c *Cloud) showServer(w http.ResponseWriter, r *http.Request, v microversion, region string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.lookup(w, r, region); s != nil {
		writeJSON(w, http.StatusOK, map[string]any{"server": c.view(s, v)})
	}
}

func (c *Cloud) listServers(detail bool) novaHandler {
	return func(w http.ResponseWriter, r *http.Request, v microversion, region string) {
		q := r.URL.Query()
		var nameRE *regexp.Regexp
		if n := q.Get("name"); n != "" {
			re, err := regexp.Compile(n)
			if err != nil {
				novaError(w, http.StatusBadRequest, "Invalid filter: name")
				return
			}
			nameRE = re
		}
		split := func(k string) []string {
			if q.Get(k) == "" {
				return nil
			}
			return strings.Split(q.Get(k), ",")
		}
		tags, tagsAny, notTags, notTagsAny := split("tags"), split("tags-any"), split("not-tags"), split("not-tags-any")
		if !v.atLeast(26) && (tags != nil || tagsAny != nil || notTags != nil || notTagsAny != nil) {
			// Before 2.26 the tag filters are unknown and ignored.
			tags, tagsAny, notTags, notTagsAny = nil, nil, nil, nil
		}
		// nova/api/openstack/common.py get_limit_and_marker: the page
		// holds min(limit, [api]max_limit) servers.
		limit := c.opts.MaxLimit
		if l := q.Get("limit"); l != "" {
			n, err := strconv.Atoi(l)
			if err != nil || n < 0 {
				invalidInput(w, "limit", "Value: "+l+". '"+l+"' does not match '^[0-9]*$'")
				return
			}
			limit = min(n, limit)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		var all []*server
		for _, s := range c.servers {
			if s.region != region || (nameRE != nil && !nameRE.MatchString(s.name)) ||
				(q.Get("status") != "" && !strings.EqualFold(q.Get("status"), s.status)) ||
				(q.Get("availability_zone") != "" && q.Get("availability_zone") != s.zone) {
				continue
			}
			if !hasAll(s.tags, tags) || (tagsAny != nil && !hasAny(s.tags, tagsAny)) ||
				(notTags != nil && hasAll(s.tags, notTags)) || hasAny(s.tags, notTagsAny) {
				continue
			}
			all = append(all, s)
		}
		// Nova's default order: created_at, then id, descending.
		slices.SortFunc(all, func(a, b *server) int {
			if d := b.created.Compare(a.created); d != 0 {
				return d
			}
			return strings.Compare(b.id, a.id)
		})
		if m := q.Get("marker"); m != "" {
			i := slices.IndexFunc(all, func(s *server) bool { return s.id == m })
			if i < 0 {
				novaError(w, http.StatusBadRequest, fmt.Sprintf("marker [%s] not found", m))
				return
			}
			all = all[i+1:]
		}
		out := map[string]any{}
		page := all[:min(limit, len(all))]
		items := make([]any, len(page))
		for i, s := range page {
			if detail {
				items[i] = c.view(s, v)
			} else {
				items[i] = map[string]any{"id": s.id, "name": s.name, "links": c.links("servers", region, s.id)}
			}
		}
		out["servers"] = items
		// common.py ViewBuilder._get_collection_links: a full page links
		// to the next even when no server is left, whose page is then
		// empty and has no link.
		if limit > 0 && len(page) == limit {
			next := *r.URL
			nq := next.Query()
			nq.Set("marker", page[len(page)-1].id)
			next.RawQuery = nq.Encode()
			out["servers_links"] = []any{map[string]any{"rel": "next", "href": c.Server.URL + next.RequestURI()}}
		}
		writeJSON(w, http.StatusOK, out)
	}
}

func hasAll(have, want []string) bool {
	for _, t := range want {
		if !slices.Contains(have, t) {
			return false
		}
	}
	return true
}

func hasAny(have, want []string) bool {
	for _, t := range want {
		if slices.Contains(have, t) {
			return true
		}
	}
	return false
}

func (c *Cloud) deleteServer(w http.ResponseWriter, r *http.Request, _ microversion, region string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.lookup(w, r, region)
	if s == nil {
		return
	}
	// nova/compute/api.py delete: check_instance_lock refuses a locked
	// server to anyone but an admin (InstanceIsLocked, 409 from
	// servers.py delete); check_instance_state(vm_state=None,
	// task_state=None, must_have_launched=False) lets every state through,
	// a building one included.
	if s.locked {
		novaError(w, http.StatusConflict, fmt.Sprintf("Instance %s is locked", s.id))
		return
	}
	if s.rescheduled {
		c.destroyHostless(s)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if s.status == statusBuild && s.taskState == "scheduling" && s.destroyAt.IsZero() {
		// Not yet in a cell: Nova deletes the build request and answers
		// (nova/compute/api.py, _delete_while_booting); the conductor
		// destroys the instance once the scheduler answers (advance).
		delete(c.servers, s.id)
		c.unplaced[s.id] = s
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if interval := c.opts.ReclaimInstanceInterval; interval > 0 && s.launched && !s.deleting {
		// soft_delete (must_have_launched=True, any vm_state): again on a
		// server already SOFT_DELETED, with a new deleted_at.
		s.status, s.vmState, s.taskState, s.powerState = statusSoftDeleted, "soft-delete", "", 4
		s.reclaimAt = time.Now().Add(interval)
		s.record(actionDelete, time.Now())
		w.WriteHeader(http.StatusNoContent)
		return
	}
	c.startDelete(s)
	w.WriteHeader(http.StatusNoContent)
}

// startDelete begins a server's delete. A repeat delete of a server
// already deleting is accepted and ignored ("Instance is already in
// deleting state").
func (c *Cloud) startDelete(s *server) {
	if !s.deleting {
		s.deleting, s.taskState = true, "deleting"
		s.deleteDone = time.Now().Add(c.opts.DeleteDelay)
		s.record(actionDelete, time.Now())
	}
}

// serverAction serves the one server action a provider sends,
// forceDelete (nova/api/openstack/compute/deferred_delete.py
// _force_delete, 202): the compute API's force_delete
// (check_instance_lock; check_instance_state(task_state=None,
// must_have_launched=False)) deletes the server in any vm_state, a
// SOFT_DELETED one included. A locked server is 409; a task in progress
// raises InstanceInvalidState, which the handler does not catch, so the
// API answers 500. Any other action is refused as one the fake does not
// serve.
func (c *Cloud) serverAction(w http.ResponseWriter, r *http.Request, _ microversion, region string) {
	var body map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body) != 1 {
		novaError(w, http.StatusBadRequest, "Malformed request body")
		return
	}
	if _, ok := body["forceDelete"]; !ok {
		novaError(w, http.StatusBadRequest, "osfake serves only the forceDelete action")
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.lookup(w, r, region)
	switch {
	case s == nil:
	case s.locked:
		novaError(w, http.StatusConflict, fmt.Sprintf("Instance %s is locked", s.id))
	case s.taskState != "":
		novaError(w, http.StatusInternalServerError, "Unexpected API Error. Please report this at http://bugs.launchpad.net/nova/ and attach the Nova API log if possible.")
	case s.rescheduled:
		c.destroyHostless(s)
		w.WriteHeader(http.StatusAccepted)
	default:
		c.startDelete(s)
		w.WriteHeader(http.StatusAccepted)
	}
}

// destroyHostless is the API's delete of a rescheduled server, which has
// no host and no build request left: the API destroys the instance itself
// (nova/compute/api.py _delete: no instance.host; BUILD:
// _delete_while_booting finds no build request, _lookup_instance,
// instance.destroy; ERROR: "instance's host None is down, deleting from
// database", _local_delete, as the lane's API log shows).
func (c *Cloud) destroyHostless(s *server) {
	s.record(actionDelete, time.Now())
	c.unbindPorts(s)
	delete(c.servers, s.id)
}

// tagsEditable is Nova's check before a tag change
// (ServerTagsController._check_instance_in_valid_state): only in these
// vm_states, else 409. A building server cannot be tagged, which is why
// tags on create (2.52) matter.
func tagsEditable(w http.ResponseWriter, s *server, action string) bool {
	switch s.vmState {
	case "active", "paused", "suspended", "stopped", "shelved", "shelved_offloaded":
		return true
	}
	novaError(w, http.StatusConflict, fmt.Sprintf("Cannot '%s' instance %s while it is in vm_state %s", action, s.id, s.vmState))
	return false
}

func (c *Cloud) serverTags(w http.ResponseWriter, r *http.Request, v microversion, region string) {
	if !v.atLeast(26) {
		novaError(w, http.StatusNotFound, "The resource could not be found.")
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.lookup(w, r, region)
	if s == nil {
		return
	}
	switch r.Method {
	case http.MethodDelete:
		if !tagsEditable(w, s, "delete tags") {
			return
		}
		s.tags = []string{}
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodPut:
		var body struct {
			Tags json.RawMessage `json:"tags"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Tags == nil {
			invalidInput(w, "tags", "'tags' is a required property")
			return
		}
		var tags []string
		if msg := checkTags(body.Tags); msg != "" || json.Unmarshal(body.Tags, &tags) != nil {
			novaError(w, http.StatusBadRequest, msg)
			return
		}
		if !tagsEditable(w, s, "update tags") {
			return
		}
		s.tags = slices.Compact(slices.Sorted(slices.Values(tags)))
	}
	writeJSON(w, http.StatusOK, map[string]any{"tags": s.tags})
}

func (c *Cloud) serverTag(w http.ResponseWriter, r *http.Request, v microversion, region string) {
	if !v.atLeast(26) {
		novaError(w, http.StatusNotFound, "The resource could not be found.")
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.lookup(w, r, region)
	if s == nil {
		return
	}
	tag := r.PathValue("tag")
	has := slices.Contains(s.tags, tag)
	switch r.Method {
	case http.MethodGet:
		if !has {
			novaError(w, http.StatusNotFound, fmt.Sprintf("Server %s has no tag '%s'", s.id, tag))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case http.MethodPut:
		if !tagsEditable(w, s, "update tag") {
			return
		}
		// nova/api/openstack/compute/server_tags.py update.
		quoted, _ := json.Marshal(tag)
		if msg := checkTag(quoted); msg != "" {
			novaError(w, http.StatusBadRequest, fmt.Sprintf("Tag '%s' is invalid. It must be a non empty string without characters '/' and ','. Validation error message: %s", tag, msg))
			return
		}
		if len(s.tags) >= 50 {
			novaError(w, http.StatusBadRequest, "The number of tags exceeded the per-server limit 50")
			return
		}
		if has {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		s.tags = append(s.tags, tag)
		w.Header().Set("Location", c.Server.URL+r.URL.Path)
		w.WriteHeader(http.StatusCreated)
	case http.MethodDelete:
		if !tagsEditable(w, s, "delete tag") {
			return
		}
		if !has {
			novaError(w, http.StatusNotFound, fmt.Sprintf("Instance %s has no tag '%s'", s.id, tag))
			return
		}
		s.tags = slices.DeleteFunc(s.tags, func(t string) bool { return t == tag })
		w.WriteHeader(http.StatusNoContent)
	}
}

func (c *Cloud) serverMetadata(w http.ResponseWriter, r *http.Request, _ microversion, region string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.lookup(w, r, region)
	if s == nil {
		return
	}
	if r.Method != http.MethodGet {
		var body struct {
			Metadata map[string]string `json:"metadata"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Metadata == nil {
			novaError(w, http.StatusBadRequest, "Malformed request body")
			return
		}
		for k, val := range body.Metadata {
			if !metaKeyRE.MatchString(k) || len(val) > 255 {
				novaError(w, http.StatusBadRequest, schemaError("metadata", nil, fmt.Sprintf("%s does not match any of the regexes: '%s'", pyString(k), metadataKeyPattern)))
				return
			}
		}
		if s.deleting {
			novaError(w, http.StatusConflict, fmt.Sprintf("Cannot 'update_instance_metadata' instance %s while it is in task_state deleting", s.id))
			return
		}
		if r.Method == http.MethodPut {
			s.metadata = map[string]string{}
		}
		for k, val := range body.Metadata {
			s.metadata[k] = val
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"metadata": s.metadata})
}

func (c *Cloud) flavor(ref string) (Flavor, bool) {
	for _, f := range c.opts.Flavors {
		if f.ID == ref || strings.HasSuffix(ref, "/flavors/"+f.ID) {
			return f, true
		}
	}
	return Flavor{}, false
}

func (c *Cloud) flavorView(f Flavor, region string, detail bool) map[string]any {
	out := map[string]any{"id": f.ID, "name": f.Name, "links": c.links("flavors", region, f.ID), "description": nil}
	if detail {
		out["vcpus"], out["ram"], out["disk"] = f.VCPUs, f.RAM, f.Disk
		out["OS-FLV-EXT-DATA:ephemeral"], out["OS-FLV-DISABLED:disabled"] = 0, false
		out["swap"], out["rxtx_factor"], out["os-flavor-access:is_public"] = 0, 1.0, true
	}
	return out
}

func (c *Cloud) listFlavors(detail bool) novaHandler {
	return func(w http.ResponseWriter, _ *http.Request, _ microversion, region string) {
		items := make([]any, len(c.opts.Flavors))
		for i, f := range c.opts.Flavors {
			items[i] = c.flavorView(f, region, detail)
		}
		writeJSON(w, http.StatusOK, map[string]any{"flavors": items})
	}
}

func (c *Cloud) showFlavor(w http.ResponseWriter, r *http.Request, _ microversion, region string) {
	f, ok := c.flavor(r.PathValue("id"))
	if !ok {
		novaError(w, http.StatusNotFound, fmt.Sprintf("Flavor %s could not be found.", r.PathValue("id")))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"flavor": c.flavorView(f, region, true)})
}

// limits is GET /limits: the quota and what the project uses (-1 is
// unlimited).
func (c *Cloud) limits(w http.ResponseWriter, _ *http.Request, _ microversion, region string) {
	c.mu.Lock()
	used := c.usage(region)
	q := c.opts.Quota
	groups := len(c.in(region).serverGroups)
	c.mu.Unlock()
	unlimited := func(n int) int {
		if n == 0 {
			return -1
		}
		return n
	}
	writeJSON(w, http.StatusOK, map[string]any{"limits": map[string]any{"rate": []any{}, "absolute": map[string]any{
		"maxTotalInstances": unlimited(q.Instances), "maxTotalCores": unlimited(q.Cores), "maxTotalRAMSize": unlimited(q.RAM),
		"maxServerMeta": 128, "maxTotalKeypairs": 100, "maxServerGroups": unlimited(q.ServerGroups), "maxServerGroupMembers": 10,
		"totalInstancesUsed": used.Instances, "totalCoresUsed": used.Cores, "totalRAMUsed": used.RAM, "totalServerGroupsUsed": groups,
	}}})
}

func (c *Cloud) zones(w http.ResponseWriter, _ *http.Request, _ microversion, _ string) {
	items := make([]any, len(c.opts.Zones))
	for i, z := range c.opts.Zones {
		items[i] = map[string]any{"zoneName": z, "zoneState": map[string]any{"available": true}, "hosts": nil}
	}
	writeJSON(w, http.StatusOK, map[string]any{"availabilityZoneInfo": items})
}

// userData decodes a server's user_data as the metadata service hands it
// to the guest.
func (s *server) userDataBytes() ([]byte, error) {
	return base64.StdEncoding.DecodeString(s.userData)
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
