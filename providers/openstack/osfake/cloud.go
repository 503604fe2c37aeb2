package osfake

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options shape one fake cloud. The zero value is a one-region cloud with
// the defaults below.
type Options struct {
	// Regions are the catalogue's regions. Default ["RegionOne"].
	Regions []string
	// Zones are the availability zones of every region. Default ["nova"].
	Zones []string
	// Flavors and Images are what Nova and Glance offer in every region.
	// Defaults: m1.tiny, m1.small; "debian-12" (active).
	Flavors []Flavor
	Images  []Image
	// Network is the one network every server is attached to.
	Network Network
	// Username, Password, ProjectName (domain "Default") and
	// AppCredentialID, AppCredentialSecret are the credentials Keystone
	// accepts; an empty pair is not accepted.
	Username, Password, ProjectName      string
	AppCredentialID, AppCredentialSecret string
	// BuildDelay is how long a server stays BUILD; DeleteDelay how long it
	// is "deleting". Zero means the next request sees the change.
	BuildDelay, DeleteDelay time.Duration
	// HoldBuilds keeps every new server BUILD (task_state spawning, once
	// scheduled) until FinishBuild.
	HoldBuilds bool
	// HoldScheduling keeps every new server BUILD in task_state
	// scheduling, its build request not yet taken by the conductor, until
	// PlaceServer. Otherwise the scheduler places a server by the next
	// request.
	HoldScheduling bool
	// TokenTTL is a token's lifetime. Default one hour.
	TokenTTL time.Duration
	// Quota is the project's compute quota in each region; zero fields
	// are unlimited.
	Quota Quota
	// MaxMicroversion is the highest compute microversion served. Default
	// 2.93, Nova Zed's (nova/api/openstack/api_version_request.py
	// _MAX_API_VERSION), the release the real-cloud lane runs.
	MaxMicroversion string
	// MaxLimit is Nova's [api]max_limit, the most items one page of a
	// list holds. Default 1000, Nova's.
	MaxLimit int
	// ReclaimInstanceInterval is Nova's [DEFAULT]reclaim_instance_interval:
	// above zero, a DELETE of a server that has launched soft-deletes it
	// (nova/api/openstack/compute/servers.py _delete → compute API
	// soft_delete; one that never launched is deleted, InstanceInvalidState
	// caught there): SOFT_DELETED, vm_state soft-delete, until Nova's
	// periodic _reclaim_queued_deletes removes it once the interval has
	// passed since its deleted_at. A repeated DELETE soft-deletes it again
	// and sets deleted_at anew; forceDelete deletes it (deferred_delete.py).
	ReclaimInstanceInterval time.Duration
	// External is the external network floating IPs come from
	// (floatingips.go); nil: the cloud has none.
	External *ExternalNetwork
	// Admin gives the token the admin role: Neutron then lists every
	// project's security groups, not only the token's project's
	// (neutron/conf/policies/security_group.py, get_security_group:
	// ADMIN_OR_PROJECT_READER; an admin's list is filtered only by the
	// query's project_id).
	Admin bool
}

// Flavor is a Nova flavor.
type Flavor struct {
	ID, Name         string
	VCPUs, RAM, Disk int
}

// Image is a Glance image.
type Image struct {
	ID, Name, Status string
}

// Network is the network servers get their address on.
type Network struct {
	ID, Name string
	// Prefix is the first three octets of the addresses handed out to
	// servers Nova makes the port of.
	Prefix string
	// Subnets are the network's IPv4 subnets (ports.go). Default one,
	// <Prefix>.0/24 with gateway <Prefix>.1, no resolvers, DHCP on.
	Subnets []Subnet
}

// Quota is a project's compute and security group quota.
type Quota struct {
	Instances, Cores, RAM int
	// ServerGroups is Nova's server_groups quota; SecurityGroups and
	// SecurityGroupRules Neutron's security_group and security_group_rule;
	// FloatingIPs Neutron's floatingip.
	ServerGroups, SecurityGroups, SecurityGroupRules, FloatingIPs int
}

// Cloud is one running fake.
type Cloud struct {
	// Server is the TLS server; its certificate signs every endpoint.
	Server *httptest.Server
	opts   Options

	calls atomic.Int64

	mu      sync.Mutex
	servers map[string]*server
	// unplaced are servers deleted while being scheduled: their build
	// request is gone and the conductor has not yet written them to a cell,
	// so the API finds none of them (nova/compute/api.py, _get_instance).
	unplaced  map[string]*server
	tokens    map[string]token
	faults    []fault
	drops     []matcher
	cut       cut
	buildFail string
	reject    bool
	// rejectAt is the request, counted by calls, from which Keystone
	// refuses every credential (RejectCredentialsFrom); zero: none.
	rejectAt  int64
	gate      func(*http.Request) error
	ipSeq     int
	groupSeq  int
	projectID string
	userID    string
	// regions holds what each region's own Neutron and Nova keep, by
	// region name.
	regions map[string]*regionState
}

// regionState is what one region's services keep apart from the other
// regions': each region of a cloud runs its own Neutron and Nova with
// their own databases, behind the endpoints the catalogue lists for that
// region (keystone.go), so a port, floating IP, security group or server
// group made in one region is neither listed nor found by ID in another
// (404), and each region's quotas count its own (the Identity API's
// "Regions": the services of a region are its own deployment).
type regionState struct {
	// secGroups and serverGroups are Neutron's security groups and Nova's
	// server groups (neutron.go, servergroups.go).
	secGroups    map[string]*secGroup
	serverGroups map[string]*serverGroup
	// ports are Neutron's ports the caller made (ports.go); a server
	// Nova makes the port of keeps its address in server.addresses.
	ports map[string]*port
	// floatingIPs are Neutron's floating IPs (floatingips.go).
	floatingIPs map[string]*floatingIP
}

// in is the state of the named region, one of Options.Regions.
func (c *Cloud) in(region string) *regionState { return c.regions[region] }

// at is the state of the region a request's path names; the service
// wrappers (neutron, nova) answered 404 for any other region.
func (c *Cloud) at(r *http.Request) *regionState { return c.in(r.PathValue("region")) }

// New starts a fake cloud; it is closed when the test ends (Close).
func New(opts Options) *Cloud {
	if len(opts.Regions) == 0 {
		opts.Regions = []string{"RegionOne"}
	}
	if len(opts.Zones) == 0 {
		opts.Zones = []string{"nova"}
	}
	if opts.Flavors == nil {
		opts.Flavors = []Flavor{{ID: "1", Name: "m1.tiny", VCPUs: 1, RAM: 512, Disk: 1}, {ID: "2", Name: "m1.small", VCPUs: 1, RAM: 2048, Disk: 20}}
	}
	if opts.Images == nil {
		opts.Images = []Image{{ID: newUUID(), Name: "debian-12", Status: "active"}}
	}
	if opts.Network.ID == "" {
		opts.Network.ID = newUUID()
	}
	if opts.Network.Name == "" {
		opts.Network.Name = "private"
	}
	if opts.Network.Prefix == "" {
		opts.Network.Prefix = "10.0.0"
	}
	if opts.Network.Subnets == nil {
		opts.Network.Subnets = []Subnet{{CIDR: opts.Network.Prefix + ".0/24", GatewayIP: opts.Network.Prefix + ".1", EnableDHCP: true}}
	}
	opts.Network.Subnets = slices.Clone(opts.Network.Subnets)
	for i := range opts.Network.Subnets {
		if opts.Network.Subnets[i].ID == "" {
			opts.Network.Subnets[i].ID = newUUID()
		}
	}
	if opts.TokenTTL == 0 {
		opts.TokenTTL = time.Hour
	}
	if opts.MaxMicroversion == "" {
		opts.MaxMicroversion = "2.93"
	}
	if opts.MaxLimit == 0 {
		opts.MaxLimit = 1000
	}
	c := &Cloud{opts: opts, servers: map[string]*server{}, unplaced: map[string]*server{}, tokens: map[string]token{}, projectID: hexID(), userID: hexID(),
		regions: map[string]*regionState{}}
	for _, region := range opts.Regions {
		c.regions[region] = &regionState{secGroups: map[string]*secGroup{}, serverGroups: map[string]*serverGroup{}, ports: map[string]*port{}, floatingIPs: map[string]*floatingIP{}}
	}
	mux := http.NewServeMux()
	c.routeKeystone(mux)
	c.routeNova(mux)
	c.routeGlance(mux)
	c.routeNeutron(mux)
	c.routePorts(mux)
	c.routeFloatingIPs(mux)
	c.routeServerGroups(mux)
	c.Server = httptest.NewTLSServer(c.front(mux))
	return c
}

// Close stops the server.
func (c *Cloud) Close() { c.Server.Close() }

// AuthURL is Keystone's v3 endpoint, as clouds.yaml's auth_url.
func (c *Cloud) AuthURL() string { return c.Server.URL + "/identity/v3" }

// Calls counts every request the fake received.
func (c *Cloud) Calls() int { return int(c.calls.Load()) }

// front counts, gates and faults every request before the API sees it.
func (c *Cloud) front(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := c.calls.Add(1)
		c.mu.Lock()
		gate := c.gate
		if c.rejectAt != 0 && n >= c.rejectAt {
			c.rejectAt = 0
			c.rejectLocked(true)
		}
		c.mu.Unlock()
		if gate != nil && gate(r) != nil {
			// Abort, not return: a handler that wrote nothing is
			// answered 200 with an empty body, and a refused
			// HEAD /v3/auth/tokens would read as a valid token.
			panic(http.ErrAbortHandler)
		}
		if after, fault, ok := c.takeCut(n); ok {
			if fault != 0 {
				refuse(w, r, fault)
				return
			}
			if after {
				api.ServeHTTP(discard{header: http.Header{}}, r)
			}
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte(badGatewayBody))
			return
		}
		if f, ok := c.takeFault(r); ok {
			w.Header().Set("Content-Type", "application/json")
			for k, v := range f.header {
				w.Header().Set(k, v)
			}
			w.WriteHeader(f.status)
			_, _ = w.Write([]byte(f.body))
			return
		}
		if c.takeDrop(r) {
			// Serve the request, then lose the answer, as a cut
			// connection does after the server acted on it.
			api.ServeHTTP(discard{header: http.Header{}}, r)
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
				}
			}
			return
		}
		api.ServeHTTP(w, r)
	})
}

// discard is a ResponseWriter whose answer nobody receives.
type discard struct{ header http.Header }

func (d discard) Header() http.Header         { return d.header }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}

// matcher selects requests by method and path.
type matcher struct {
	method string
	path   *regexp.Regexp
}

// match: method is one method, several separated by "|", or "" for any.
func (m matcher) match(r *http.Request) bool {
	return (m.method == "" || slices.Contains(strings.Split(m.method, "|"), r.Method)) && m.path.MatchString(r.URL.Path)
}

type fault struct {
	matcher
	status int
	body   string
	header map[string]string
}

func (c *Cloud) takeFault(r *http.Request) (fault, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, f := range c.faults {
		if f.match(r) {
			c.faults = append(c.faults[:i], c.faults[i+1:]...)
			return f, true
		}
	}
	return fault{}, false
}

// cut names one request by its number in calls, and whether it is cut
// after the API served it, or refused with fault before (FailCall). Zero
// cuts nothing.
type cut struct {
	call  int64
	after bool
	fault CallFault
}

func (c *Cloud) takeCut(n int64) (after bool, fault CallFault, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut.call == 0 || c.cut.call != n {
		return false, 0, false
	}
	this := c.cut
	c.cut = cut{}
	return this.after, this.fault, true
}

func (c *Cloud) takeDrop(r *http.Request) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, m := range c.drops {
		if m.match(r) {
			c.drops = append(c.drops[:i], c.drops[i+1:]...)
			return true
		}
	}
	return false
}

// writeJSON answers with a JSON body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// novaError answers with Nova's fault body, {"<name>": {"code", "message"}}
// (Compute API guide, Faults).
func novaError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]any{faultName(status): map[string]any{"code": status, "message": message}})
}

// faultName is the body's key Nova (webob) uses for each status.
func faultName(status int) string {
	switch status {
	case 400:
		return "badRequest"
	case 401:
		return "unauthorized"
	case 403:
		return "forbidden"
	case 404:
		return "itemNotFound"
	case 405:
		return "badMethod"
	case 409:
		return "conflictingRequest"
	case 413, 429:
		return "overLimit"
	case 501:
		return "notImplemented"
	case 503:
		return "serviceUnavailable"
	default:
		return "computeFault"
	}
}

func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// hexID is a Keystone ID: 32 hex digits.
func hexID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}
