package osfake

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"time"
)

// The control methods put the cloud into the states a test needs, as the
// cloud's operators, its hypervisors or its failures would.

// Bodies of the real services' errors, for FailNext.
const (
	// QuotaBody is Nova's 403 for a create over the instance quota
	// (nova.exception.TooManyInstances).
	QuotaBody = `{"forbidden": {"code": 403, "message": "Quota exceeded for instances: Requested 1, but already used 10 of 10 instances"}}`
	// PolicyBody is Nova's 403 for a call the policy forbids
	// (nova.exception.PolicyNotAuthorized).
	PolicyBody = `{"forbidden": {"code": 403, "message": "Policy doesn't allow os_compute_api:servers:create to be performed."}}`
	// NotFoundBody is Nova's 404 for a server that does not exist.
	NotFoundBody = `{"itemNotFound": {"code": 404, "message": "Instance 9b7c1c42-5c0e-4d0b-a0f6-46a4b8a5e0f3 could not be found."}}`
	// ConflictBody is Nova's 409 for a locked server.
	ConflictBody = `{"conflictingRequest": {"code": 409, "message": "Instance 9b7c1c42-5c0e-4d0b-a0f6-46a4b8a5e0f3 is locked"}}`
	// AllocationConflictBody is Nova's 409 for a delete whose Placement
	// allocations could not be removed (nova.exception.AllocationDeleteFailed,
	// servers.py delete): it passes.
	AllocationConflictBody = `{"conflictingRequest": {"code": 409, "message": "Failed to delete allocations for consumer 9b7c1c42-5c0e-4d0b-a0f6-46a4b8a5e0f3. Error: {\"errors\": [{\"status\": 503, \"title\": \"Service Unavailable\"}]}"}}`
	// RateLimitBody is the 429 of a rate-limiting front (Nova's own
	// rate limiter used 413 with the same body).
	RateLimitBody = `{"overLimit": {"code": 429, "message": "This request was rate-limited.", "retryAfter": "2"}}`
	// ServerErrorBody is Nova's 500 for an unexpected exception.
	ServerErrorBody = `{"computeFault": {"code": 500, "message": "Unexpected API Error. Please report this at http://bugs.launchpad.net/nova/ and attach the Nova API log if possible.\n<class 'oslo_db.exception.DBConnectionError'>"}}`
	// UnavailableBody is the 503 a load balancer or Nova gives while
	// the API is down.
	UnavailableBody = `{"serviceUnavailable": {"code": 503, "message": "The server is currently unavailable. Please try again at a later time."}}`
)

// badGatewayBody is HAProxy's 502 page: the load balancer the OpenStack
// HA guide puts in front of every API ("Configure HAProxy",
// https://docs.openstack.org/ha-guide/control-plane-stateless.html)
// answers it when the API's connection drops before a complete response.
const badGatewayBody = "<html><body><h1>502 Bad Gateway</h1>\nThe server returned an invalid or incomplete response.\n</body></html>\n"

// FailNext makes the next request whose method is method (several
// separated by "|", "" any) and
// whose URL path matches pathRE be answered with status and body instead
// of being served.
func (c *Cloud) FailNext(method, pathRE string, status int, body string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = append(c.faults, fault{matcher: matcher{method, regexp.MustCompile(pathRE)}, status: status, body: body})
}

// DropNextResponse makes the next matching request be served, and its
// response lost: the connection closes before the answer is sent.
func (c *Cloud) DropNextResponse(method, pathRE string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drops = append(c.drops, matcher{method, regexp.MustCompile(pathRE)})
}

// CutCall cuts the n-th request from now (1 is the next; counted as
// Calls counts), as a connection dropped between the load balancer and the
// API does: the load balancer answers 502. With after false the API never
// sees the request; with after true it serves it and its answer is lost.
// A later CutCall replaces an earlier one not yet reached.
func (c *Cloud) CutCall(n int, after bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = cut{call: c.calls.Load() + int64(n), after: after}
}

// Reset drops every fault, lost answer, cut and failing build still
// queued, accepts the credentials again, releases the builds HoldBuild
// holds, the scheduling HoldScheduling holds and the locks LockServer set, and lets deletes BeginDelete holds
// finish: the cloud behaves again. The
// gate is the caller's (SetGate) and stays as it is.
func (c *Cloud) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults, c.drops, c.cut, c.buildFail, c.reject, c.rejectAt = nil, nil, cut{}, "", false, 0
	now := time.Now()
	for _, s := range c.unplaced {
		s.schedulingHeld = false
	}
	for _, s := range c.servers {
		s.held, s.locked, s.schedulingHeld = false, false, false
		if s.deleting && s.deleteDone.IsZero() {
			s.deleteDone = now.Add(c.opts.DeleteDelay)
		}
	}
}

// RemoveServer deletes a server at once, whatever its state, as an admin
// with direct access would; the API's delete is DELETE /servers/{id}.
func (c *Cloud) RemoveServer(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.servers[id]
	if !ok {
		return fmt.Errorf("osfake: no server %s", id)
	}
	c.unbindPorts(s)
	delete(c.servers, id)
	return nil
}

// FailNextBuild makes the next server created end its build in ERROR with
// the fault message (NoValidHost: the scheduler found no host).
func (c *Cloud) FailNextBuild(message string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buildFail = message
}

// RejectCredentials makes Keystone refuse every credential and revokes
// every token issued (reject true), or accept them again (false).
func (c *Cloud) RejectCredentials(reject bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rejectAt = 0
	c.rejectLocked(reject)
}

func (c *Cloud) rejectLocked(reject bool) {
	c.reject = reject
	if reject {
		c.tokens = map[string]token{}
	}
}

// RejectCredentialsFrom does RejectCredentials(true) when the n-th request
// from now (1 is the next; counted as Calls counts) arrives, before it is
// served: a key revoked partway through an operation.
func (c *Cloud) RejectCredentialsFrom(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rejectAt = c.calls.Load() + int64(n)
}

// RevokeTokens revokes every token issued, as Keystone's DELETE
// /v3/auth/tokens does for one (the API answers it too, revokeToken).
func (c *Cloud) RevokeTokens() { c.ExpireTokens() }

// ExpireTokens ends every token's life now, as Keystone's expiry does.
func (c *Cloud) ExpireTokens() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tokens = map[string]token{}
}

// SetGate runs gate at the start of every request; a non-nil error drops
// the request unanswered. A gate that blocks is a hanging cloud.
func (c *Cloud) SetGate(gate func(*http.Request) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gate = gate
}

// ReplaceImage deletes the image of that name and uploads another under
// it, as a person rotating an image does: the old ID is gone (Nova's
// create answers it 400 "Can not find requested image", ImageNotFound in
// servers.py create), the name finds the new one, whose ID it returns.
func (c *Cloud) ReplaceImage(name string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := newUUID()
	var images []Image
	found := false
	for _, img := range c.opts.Images {
		if img.Name == name {
			found = true
			continue
		}
		images = append(images, img)
	}
	if !found {
		return "", fmt.Errorf("osfake: no image %q", name)
	}
	images = append(images, Image{ID: id, Name: name, Status: "active"})
	c.opts.Images = images
	return id, nil
}

// SetQuota changes the project's compute quota.
func (c *Cloud) SetQuota(q Quota) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opts.Quota = q
}

func (c *Cloud) withServer(id string, fn func(*server)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(time.Now())
	s, ok := c.servers[id]
	if !ok {
		return fmt.Errorf("osfake: no server %s", id)
	}
	fn(s)
	return nil
}

// FinishBuild ends a held build now (ACTIVE with an address, or ERROR
// with the fault it was set to fail with).
func (c *Cloud) FinishBuild(id string) error {
	return c.withServer(id, func(s *server) {
		if s.status == statusBuild {
			s.held = false
			c.finishBuild(s, time.Now().UTC())
		}
	})
}

// PlaceServer answers for the scheduler, which HoldScheduling holds: the
// server leaves task_state scheduling (or, deleted meanwhile, is written to
// its cell and destroyed by the conductor). A build RescheduleBuild sent
// back is placed again the same way.
func (c *Cloud) PlaceServer(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.servers[id]
	if !ok {
		s, ok = c.unplaced[id]
	}
	if !ok {
		return fmt.Errorf("osfake: no server %s", id)
	}
	s.schedulingHeld, s.rescheduled = false, false
	c.advance(time.Now())
	return nil
}

// HoldBuild keeps a server that is still BUILD in BUILD, task_state
// spawning, until release: a slow hypervisor.
func (c *Cloud) HoldBuild(id string) (release func(), err error) {
	var building bool
	err = c.withServer(id, func(s *server) {
		building = s.status == statusBuild
		if building {
			s.held, s.taskState = true, "spawning"
		}
	})
	if err == nil && !building {
		err = fmt.Errorf("osfake: server %s is no longer BUILD", id)
	}
	return func() { _ = c.withServer(id, func(s *server) { s.held = false }) }, err
}

// LockServer locks the server as Nova's lock action does (POST
// /servers/{id}/action {"lock": null}, by a person or an admin): its
// delete is refused with 409 until unlock.
func (c *Cloud) LockServer(id string) (unlock func(), err error) {
	err = c.withServer(id, func(s *server) { s.locked = true })
	return func() { _ = c.withServer(id, func(s *server) { s.locked = false }) }, err
}

// SetAddresses replaces the server's addresses on its network, as Neutron
// binding a port does.
func (c *Cloud) SetAddresses(id string, ips ...string) error {
	return c.withServer(id, func(s *server) { s.addresses = slices.Clone(ips) })
}

// SetStatus sets a server's status, vm_state and task_state ("" is null),
// as a hypervisor event or an admin action would.
func (c *Cloud) SetStatus(id, status, vmState, taskState string) error {
	return c.withServer(id, func(s *server) {
		s.status, s.vmState, s.taskState, s.updated = status, vmState, taskState, time.Now().UTC()
	})
}

// StopServer stops the server as os-stop leaves it: SHUTOFF, vm_state
// stopped, no task, power_state 4 (SHUTDOWN), which stop_instance reads
// back from the driver (nova/compute/manager.py stop_instance,
// nova/compute/power_state.py).
func (c *Cloud) StopServer(id string) error {
	return c.withServer(id, func(s *server) {
		s.status, s.vmState, s.taskState, s.powerState, s.updated = "SHUTOFF", "stopped", "", 4, time.Now().UTC()
	})
}

// BeginDelete starts the server's deletion and holds it in task_state
// deleting until finish, which lets it end.
func (c *Cloud) BeginDelete(id string) (finish func(), err error) {
	err = c.withServer(id, func(s *server) {
		s.deleting, s.taskState, s.deleteDone = true, "deleting", time.Time{}
		s.record(actionDelete, time.Now())
	})
	return func() {
		_ = c.withServer(id, func(s *server) { s.deleteDone = time.Now() })
	}, err
}

// ServerSpec is a server the control makes directly, as another tool
// or a person would.
type ServerSpec struct {
	Name, Region string
	Tags         []string
	Metadata     map[string]string
	UserData     string // base64
	// Held keeps it BUILD until FinishBuild.
	Held bool
}

// CreateServer makes a server without going through the API.
func (c *Cloud) CreateServer(spec ServerSpec) string {
	now := time.Now().UTC()
	s := &server{
		id: newUUID(), name: spec.Name, region: spec.Region, zone: c.opts.Zones[0], flavor: c.opts.Flavors[0],
		imageID: c.images()[0].ID, status: statusBuild, vmState: "building", taskState: "scheduling",
		tags: slices.Clone(spec.Tags), metadata: map[string]string{}, userData: spec.UserData,
		securityGroups: []string{"default"}, created: now.Truncate(time.Second), updated: now,
	}
	if s.tags == nil {
		s.tags = []string{}
	}
	for k, v := range spec.Metadata {
		s.metadata[k] = v
	}
	if s.region == "" {
		s.region = c.opts.Regions[0]
	}
	s.schedulingHeld = c.opts.HoldScheduling
	if !spec.Held && !c.opts.HoldBuilds {
		s.buildDone = now.Add(c.opts.BuildDelay)
	}
	s.record(actionCreate, now)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.servers[s.id] = s
	return s.id
}

// ServerInfo is what the control reads of a server.
type ServerInfo struct {
	ID, Name, Region, Status, TaskState string
	ImageID                             string
	Tags                                []string
	Metadata                            map[string]string
	Addresses                           []string
	// UserData is user_data decoded, as the metadata service serves it.
	UserData []byte
	// ConfigDrive says it was created with config_drive true; Group is
	// the server group of its scheduler hint; SecurityGroups are the
	// groups (names or IDs) it was created with.
	ConfigDrive    bool
	Group          string
	SecurityGroups []string
	// Ports are the ports the create passed in (ports.go).
	Ports []string
}

// Servers lists every server, deleting ones included, sorted by ID.
func (c *Cloud) Servers() []ServerInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(time.Now())
	var out []ServerInfo
	for _, s := range c.servers {
		ud, _ := s.userDataBytes()
		out = append(out, ServerInfo{ID: s.id, Name: s.name, Region: s.region, Status: s.status, TaskState: s.taskState, ImageID: s.imageID,
			Tags: slices.Clone(s.tags), Metadata: s.metadata, Addresses: slices.Clone(s.addresses), UserData: ud,
			ConfigDrive: s.configDrive, Group: s.group, SecurityGroups: slices.Clone(s.securityGroups), Ports: slices.Clone(s.ports)})
	}
	slices.SortFunc(out, func(a, b ServerInfo) int {
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	return out
}

// Lookup returns one server.
func (c *Cloud) Lookup(id string) (ServerInfo, bool) {
	for _, s := range c.Servers() {
		if s.ID == id {
			return s, true
		}
	}
	return ServerInfo{}, false
}

// Options returns the options the cloud runs with, defaults filled in.
func (c *Cloud) Options() Options {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opts
}
