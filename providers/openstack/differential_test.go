package openstack

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/providers/openstack/osfake"
)

// TestDifferential holds osfake to the real services (docs/openstack-provider.md):
// the same sequence of requests — the provider's own, made by running it
// through a lifecycle, and the malformed and known-refused ones the
// harness and the real schemas name — goes to osfake and to the real
// cloud, through the wire that records each exchange. It compares, for
// each kind of request, the status codes and the shape of the response
// fields the provider reads (their JSON types, not their values). Every
// difference fails the test unless knownDifferences lists it with its
// reason (also in osfake/doc.go).
func TestDifferential(t *testing.T) {
	rc := startRealCloud(t)
	external := os.Getenv("OPENSTACK_TEST_EXTERNAL_NETWORK")
	if external != "" {
		rc.tenant.routeTo(t, external)
	}
	real := runSequence(t, rc.provider(t), rc.wire, contract.Placement{Region: "one", Zone: "zone", MachineType: "small", Image: "proxy"}, rc.tenant.static, external)

	// Builds and deletes that take a while, as the real ones do, so the
	// fake goes through the same states (task_state spawning, deleting).
	var fakeExternal string
	if external != "" {
		fakeExternal = newUUID()
	}
	fake := startCloud(t, func(o *osfake.Options) {
		o.BuildDelay, o.DeleteDelay = time.Second, time.Second
		if fakeExternal != "" {
			o.External = &osfake.ExternalNetwork{ID: fakeExternal, CIDR: "203.0.113.0/24"}
		}
	})
	w := newWire()
	fp := fake.provider(t)
	fp.wrapTransport = w.wrap
	faked := runSequence(t, fp, w, contract.Placement{Region: "one", Zone: "az1", MachineType: "small", Image: "debian-12"}, testNetwork("10.0.0.200/24"), fakeExternal)

	for _, kind := range slices.Sorted(maps.Keys(union(real, faked))) {
		r, f := real[kind], faked[kind]
		for _, d := range compareKind(r, f) {
			key := kind + " " + d.what
			if reason, ok := knownDifferences[key]; ok {
				t.Logf("known difference %s: real %s, osfake %s (%s)", key, d.real, d.fake, reason)
				continue
			}
			t.Errorf("%s: real %s, osfake %s", key, d.real, d.fake)
		}
	}
}

// knownDifferences are the differences osfake keeps, with the reason
// (osfake/doc.go lists them too): "<kind> <what>" as the test prints it.
var knownDifferences = map[string]string{}

// observed is what one kind of request got: the statuses, the error
// bodies' keys, and the union of the read fields' JSON types.
type observed struct {
	statuses map[int]bool
	errKeys  map[string]bool
	fields   map[string]map[string]bool // field path → JSON types seen
	messages []string
}

func union[V any](a, b map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

type difference struct{ what, real, fake string }

func compareKind(r, f *observed) []difference {
	if r == nil || f == nil {
		return []difference{{"sent", fmt.Sprint(r != nil), fmt.Sprint(f != nil)}}
	}
	var out []difference
	if a, b := sortedKeys(r.statuses), sortedKeys(f.statuses); a != b {
		out = append(out, difference{"status", a + " " + strings.Join(r.messages, " | "), b + " " + strings.Join(f.messages, " | ")})
	}
	if a, b := sortedKeys(r.errKeys), sortedKeys(f.errKeys); a != b {
		out = append(out, difference{"error body", a, b})
	}
	for _, field := range slices.Sorted(maps.Keys(union(r.fields, f.fields))) {
		// A field that is null in one state and set in another (a
		// task_state) is compared by its non-null types: which states the
		// sequence met differs with timing, not with the service.
		if a, b := nonNull(r.fields[field]), nonNull(f.fields[field]); a != b {
			out = append(out, difference{"field " + field, orAbsent(a), orAbsent(b)})
		}
	}
	return out
}

func nonNull(types map[string]bool) string {
	if len(types) == 0 {
		return ""
	}
	out := maps.Clone(types)
	if len(out) > 1 {
		delete(out, "null")
	}
	return sortedKeys(out)
}

func orAbsent(s string) string {
	if s == "" {
		return "absent"
	}
	return s
}

func sortedKeys[K comparable](m map[K]bool) string {
	var s []string
	for k := range m {
		s = append(s, fmt.Sprint(k))
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}

// runSequence runs the provider's own calls (a lifecycle, and one with
// the static network: its subnet and port calls) and the raw requests
// against one cloud and returns what each kind of request got.
func runSequence(t *testing.T, p *Provider, w *wire, pl contract.Placement, static *contract.StaticNetwork, external string) map[string]*observed {
	t.Helper()
	ctx := logr.NewContext(context.Background(), testr.New(t))
	w.startRecording()

	// The provider's own: a lifecycle, as the operator drives it.
	for _, network := range []*contract.StaticNetwork{nil, static} {
		name := "osreal-diff"
		if network != nil {
			name += "-static"
		}
		req := contract.CreateRequest{Name: name, UID: newUUID(), Owner: "osreal-diff", Port: 3128, Placement: pl,
			CloudInit: []byte("#cloud-config\nhostname: osreal-diff\n"), Network: network}
		if inst, err := p.Create(ctx, req); err != nil {
			// Compared below all the same: the status says what refused it.
			t.Logf("Create %s: %v", name, err)
		} else {
			lifecycle(ctx, t, p, req, inst)
		}
	}
	if external != "" {
		floatingLifecycle(ctx, t, p, pl, external)
	}
	provider := classifyExchanges(w.exchanges(), "")

	// The raw ones, with the provider's session (token, endpoints) and a
	// body that is valid but for the one thing named.
	w.startRecording()
	sendRaw(ctx, t, p, pl)
	sendRawPorts(ctx, t, p, pl, *static)
	raw := classifyExchanges(w.exchanges(), "raw ")
	maps.Copy(provider, raw)
	return provider
}

// sendRawPorts sends Neutron's and Nova's answers about ports the fake
// plays (osfake/ports.go), each a valid request but for the one thing
// its name says: a port of a free fixed IP, the same address again
// (IpAddressAlreadyAllocated), an address outside the subnet
// (InvalidIpForSubnet), tags in a create (taken; osfake refused them with
// 400 until this test met Zed's 201), a
// server on a port that does not exist, the port's delete twice.
func sendRawPorts(ctx context.Context, t *testing.T, p *Provider, pl contract.Placement, static contract.StaticNetwork) {
	t.Helper()
	plan, err := p.plan(contract.CreateRequest{Name: "osreal-raw", UID: "u", Owner: "o", Port: 1, Placement: pl})
	if err != nil {
		t.Fatal(err)
	}
	subnetID, err := p.subnetFor(ctx, plan, static)
	if err != nil {
		t.Fatal(err)
	}
	flavorID, imageID, err := p.resolve(ctx, plan)
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.session(ctx, plan.regionKey)
	if err != nil {
		t.Fatal(err)
	}
	free := static.Address.Addr()
	for range 20 {
		free = free.Next()
	}
	port := func(ip string, extra map[string]any) map[string]any {
		b := map[string]any{"network_id": plan.region.Network, "name": "osreal-raw-port", "fixed_ips": []map[string]string{{"subnet_id": subnetID, "ip_address": ip}}}
		maps.Copy(b, extra)
		return map[string]any{"port": b}
	}
	var made string
	for _, r := range []struct {
		name, method string
		client       *gophercloud.ServiceClient
		path         func() string
		body         any
	}{
		{"port create fixed ip", "POST", c.network, func() string { return "ports" }, port(free.String(), nil)},
		{"port create taken fixed ip", "POST", c.network, func() string { return "ports" }, port(free.String(), nil)},
		{"port create ip outside the subnet", "POST", c.network, func() string { return "ports" }, port("203.0.113.10", nil)},
		{"port create with tags", "POST", c.network, func() string { return "ports" }, port(free.Next().String(), map[string]any{"tags": []string{"osreal"}})},
		{"server create on a missing port", "POST", c.compute, func() string { return "servers" }, map[string]any{"server": map[string]any{
			"name": "osreal-raw-port", "flavorRef": flavorID, "imageRef": imageID, "availability_zone": plan.zone,
			"networks": []map[string]string{{"port": "00000000-0000-4000-8000-000000000000"}},
		}}},
		{"port delete", "DELETE", c.network, func() string { return "ports/" + made }, nil},
		{"port delete missing", "DELETE", c.network, func() string { return "ports/" + made }, nil},
	} {
		var out struct {
			Port struct {
				ID string `json:"id"`
			} `json:"port"`
		}
		client := *r.client
		if r.client == c.compute {
			client.Microversion = computeMicroversion
		}
		resp, err := client.Request(ctx, r.method, client.ServiceURL(r.path()), &gophercloud.RequestOpts{
			JSONBody: r.body, JSONResponse: &out, OkCodes: []int{200, 201, 202, 204},
			MoreHeaders: map[string]string{"X-Osreal-Raw": r.name},
		})
		if resp != nil && resp.Body != nil {
			_ = resp.Body.Close()
		}
		if err == nil && resp != nil && resp.StatusCode == http.StatusCreated && made == "" {
			made = out.Port.ID
		}
		if err == nil && r.client == c.compute {
			t.Logf("raw %q was accepted: deleting the server it made", r.name)
			deleteRawServers(ctx, p, plan.regionKey)
		}
	}
}

// lifecycle is the rest of the provider's own sequence once Create made
// the server: Running, a repeat Create, the lists, Delete twice.
func lifecycle(ctx context.Context, t *testing.T, p *Provider, req contract.CreateRequest, inst contract.Instance) (running contract.Instance) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		got, err := p.Get(ctx, inst.ProviderID)
		if err == nil && got.State == contract.StateRunning {
			running = got
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not Running: %+v %v", inst.ProviderID, got, err)
		}
	}
	if _, err := p.Create(ctx, req); err != nil {
		t.Errorf("repeat Create: %v", err)
	}
	for _, l := range [][2]string{{contract.LabelUID, req.UID}, {contract.LabelManaged, req.Owner}, {contract.LabelManaged, contract.LegacyManagedValue}} {
		if _, err := p.ListByTag(ctx, l[0], l[1]); err != nil {
			t.Errorf("ListByTag(%s, %s): %v", l[0], l[1], err)
		}
	}
	// The instance actions Get reads of a server in task_state scheduling
	// (scheduling.go), listed here so both clouds answer it whatever
	// state their Gets met: a running server's hold no delete.
	regionKey, id, _ := ids.Parse(inst.ProviderID)
	if going, err := p.deleteRecorded(ctx, regionKey, id); err != nil || going {
		t.Errorf("the actions of a running server: delete recorded %v, %v; want none", going, err)
	}
	if err := p.Delete(ctx, inst.ProviderID); err != nil {
		t.Errorf("Delete: %v", err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		_, err := p.Get(ctx, inst.ProviderID)
		if errors.Is(err, contract.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not gone: %v", inst.ProviderID, err)
		}
	}
	if err := p.Delete(ctx, inst.ProviderID); err != nil {
		t.Errorf("Delete of a server gone: %v", err)
	}
	return running
}

// floatingLifecycle is a lifecycle with a floating IP from the external
// network (floatingips.go): made and associated at Create, kept by the
// Delete, found again by the next Create of the replica, released by
// ReleaseEgress.
func floatingLifecycle(ctx context.Context, t *testing.T, p *Provider, pl contract.Placement, external string) {
	t.Helper()
	cfg := p.cfg
	cfg.Regions = maps.Clone(cfg.Regions)
	for k, r := range cfg.Regions {
		r.FloatingIPs = &FloatingIPs{Network: external}
		cfg.Regions[k] = r
	}
	fp, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fp.wrapTransport = p.wrapTransport
	req := contract.CreateRequest{Name: "osreal-diff-fip", UID: newUUID(), Owner: "osreal-diff", Port: 3128, Placement: pl,
		CloudInit: []byte("#cloud-config\nhostname: osreal-diff\n")}
	inst, err := fp.Create(ctx, req)
	if err != nil {
		// Compared below all the same: the status says what refused it.
		t.Logf("Create %s: %v", req.Name, err)
		return
	}
	first := lifecycle(ctx, t, fp, req, inst)
	again := req
	again.Name += "-again"
	if inst, err := fp.Create(ctx, again); err != nil {
		t.Logf("Create %s: %v", again.Name, err)
	} else if second := lifecycle(ctx, t, fp, again, inst); first.EgressIP == "" || second.EgressIP != first.EgressIP {
		t.Errorf("the replica's egress address: %q, then %q after its replacement; want one floating IP, kept", first.EgressIP, second.EgressIP)
	}
	// An update under a stale If-Match (floatingips.go draws from a set
	// so): refused, 412, on both clouds.
	if all, err := fp.listFloatingIPs(ctx, pl.Region, floatingips.ListOpts{}); err == nil {
		for _, f := range all {
			if _, uid, _, ok := fipMarks(f.Description); ok && uid == req.UID {
				stale, desc := f.RevisionNumber-1, f.Description
				err := fp.do(ctx, "StaleUpdate", pl.Region, func(ctx context.Context, c *clients) error {
					_, err := floatingips.Update(ctx, c.network, f.ID, floatingips.UpdateOpts{Description: &desc, RevisionNumber: &stale}).Extract()
					return err
				})
				if !isStatus(err, 412) {
					t.Errorf("an update of floating IP %s at a stale revision = %v, want 412", f.FloatingIP, err)
				}
			}
		}
	}
	if err := fp.ReleaseEgress(ctx, contract.Egress{Region: pl.Region, UID: req.UID}); err != nil {
		t.Errorf("ReleaseEgress: %v", err)
	}
}

// rawRequest is one request sent as is: name says what it checks.
type rawRequest struct {
	name, method, path string
	microversion       string
	body               func(base map[string]any)
	// action is a server action's body, sent as is.
	action map[string]any
}

// rawRequests are the malformed and known-refused requests (Nova's
// schemas: nova/api/validation/parameter_types.py metadata, tag, and
// nova/api/openstack/compute/schemas/servers.py base_create; the
// microversion checks of nova/api/openstack/wsgi.py), each a
// valid create body but for the one thing its name says.
var rawRequests = []rawRequest{
	{name: "create metadata key with /", method: "POST", path: "servers", body: func(s map[string]any) {
		s["metadata"] = map[string]string{contract.LabelManaged: "x"}
	}},
	{name: "create metadata value of 256", method: "POST", path: "servers", body: func(s map[string]any) {
		s["metadata"] = map[string]string{"k": strings.Repeat("v", 256)}
	}},
	{name: "create metadata key of 256", method: "POST", path: "servers", body: func(s map[string]any) {
		s["metadata"] = map[string]string{strings.Repeat("k", 256): "v"}
	}},
	{name: "create tag of 61", method: "POST", path: "servers", body: func(s map[string]any) { s["tags"] = []string{strings.Repeat("t", 61)} }},
	{name: "create tag with ,", method: "POST", path: "servers", body: func(s map[string]any) { s["tags"] = []string{"a,b"} }},
	{name: "create tag with /", method: "POST", path: "servers", body: func(s map[string]any) { s["tags"] = []string{"a/b"} }},
	{name: "create 51 tags", method: "POST", path: "servers", body: func(s map[string]any) {
		var tags []string
		for i := range 51 {
			tags = append(tags, fmt.Sprintf("t%d", i))
		}
		s["tags"] = tags
	}},
	{name: "create tags before 2.52", method: "POST", path: "servers", microversion: "2.51", body: func(s map[string]any) { s["tags"] = []string{"a"} }},
	{name: "create user_data over 65535", method: "POST", path: "servers", body: func(s map[string]any) {
		s["user_data"] = base64.StdEncoding.EncodeToString(make([]byte, 65535/4*3+3))
	}},
	{name: "create user_data not base64", method: "POST", path: "servers", body: func(s map[string]any) { s["user_data"] = "not base64!" }},
	{name: "create unknown field", method: "POST", path: "servers", body: func(s map[string]any) { s["osreal_unknown"] = 1 }},
	{name: "create empty name", method: "POST", path: "servers", body: func(s map[string]any) { s["name"] = "" }},
	{name: "create unknown flavor", method: "POST", path: "servers", body: func(s map[string]any) { s["flavorRef"] = "osreal-no-such-flavor" }},
	{name: "create unknown image", method: "POST", path: "servers", body: func(s map[string]any) { s["imageRef"] = newUUID() }},
	{name: "list microversion 2.999", method: "GET", path: "servers/detail", microversion: "2.999"},
	{name: "list microversion not a version", method: "GET", path: "servers/detail", microversion: "two"},
	{name: "list tags and limit", method: "GET", path: "servers/detail?tags=osreal-none,osreal-other&limit=1"},
	{name: "show missing server", method: "GET", path: "servers/" + "00000000-0000-4000-8000-000000000000"},
	{name: "show malformed id", method: "GET", path: "servers/not-a-uuid"},
	{name: "delete missing server", method: "DELETE", path: "servers/" + "00000000-0000-4000-8000-000000000000"},
	{name: "force-delete missing server", method: "POST", path: "servers/" + "00000000-0000-4000-8000-000000000000/action", action: map[string]any{"forceDelete": nil}},
}

func sendRaw(ctx context.Context, t *testing.T, p *Provider, pl contract.Placement) {
	t.Helper()
	plan, err := p.plan(contract.CreateRequest{Name: "osreal-raw", UID: "u", Owner: "o", Port: 1, Placement: pl})
	if err != nil {
		t.Fatal(err)
	}
	flavorID, imageID, err := p.resolve(ctx, plan)
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.session(ctx, plan.regionKey)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rawRequests {
		var body any
		if r.body != nil {
			s := map[string]any{
				"name": fmt.Sprintf("osreal-raw-%d", i), "flavorRef": flavorID, "imageRef": imageID,
				"networks": []map[string]string{{"uuid": plan.region.Network}}, "availability_zone": plan.zone,
			}
			r.body(s)
			body = map[string]any{"server": s}
		}
		if r.action != nil {
			body = r.action
		}
		mv := r.microversion
		if mv == "" {
			mv = computeMicroversion
		}
		// The kind is named in a header of the test's own, which the
		// services ignore: the wire's record tells the raw requests apart
		// by it.
		compute := *c.compute
		compute.Microversion = mv
		resp, err := compute.Request(ctx, r.method, compute.ServiceURL(r.path), &gophercloud.RequestOpts{
			JSONBody: body, KeepResponseBody: true, OkCodes: []int{200, 202, 204},
			MoreHeaders: map[string]string{"X-Osreal-Raw": r.name},
		})
		if resp != nil && resp.Body != nil {
			_ = resp.Body.Close()
		}
		if err == nil && r.method == "POST" {
			t.Logf("raw %q was accepted (%d): deleting the server it made", r.name, resp.StatusCode)
			deleteRawServers(ctx, p, plan.regionKey)
		}
	}
}

// deleteRawServers removes the servers a raw create made.
func deleteRawServers(ctx context.Context, p *Provider, regionKey string) {
	_ = p.do(ctx, "cleanup", regionKey, func(ctx context.Context, c *clients) error {
		pages, err := servers.List(c.compute, servers.ListOpts{Name: "^osreal-raw-"}).AllPages(ctx)
		if err != nil {
			return err
		}
		found, err := servers.ExtractServers(pages)
		for _, s := range found {
			_ = servers.Delete(ctx, c.compute, s.ID).ExtractErr()
		}
		return err
	})
}

var (
	idSegmentRE = regexp.MustCompile(`/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}|[0-9]+)(/|$)`)
	apiRootRE   = regexp.MustCompile(`/(v2\.1|v2\.0|v2|v3)(/|$)`)
)

// kindOf names an exchange's kind: the method and the path from the
// API's version root on, IDs as {id} (Nova's project ID in the path
// dropped), the query's parameter names.
func kindOf(x exchange) string {
	path := x.Path
	loc := apiRootRE.FindStringIndex(path)
	if loc == nil {
		// An endpoint's version document (gophercloud reads Glance's):
		// where it sits differs by deployment.
		return x.Method + " (version document)"
	}
	path = path[loc[0]:]
	for idSegmentRE.MatchString(path) {
		path = idSegmentRE.ReplaceAllString(path, "/{id}$2")
	}
	path = strings.Replace(path, "/v2.1/{id}/", "/v2.1/", 1)
	var names []string
	for _, kv := range strings.Split(x.Query, "&") {
		if name, _, _ := strings.Cut(kv, "="); name != "" && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if len(names) > 0 {
		path += "?" + strings.Join(names, ",")
	}
	return x.Method + " " + path
}

// classifyExchanges groups the recorded exchanges by kind (prefix names
// the phase; a raw request's kind is its name).
func classifyExchanges(xs []exchange, prefix string) map[string]*observed {
	out := map[string]*observed{}
	for _, x := range xs {
		kind := kindOf(x)
		if name := x.Header.Get("X-Osreal-Raw"); name != "" {
			kind = name
		} else if prefix != "" {
			// The session's own calls during the raw phase (a login, a
			// lookup) are the provider's and counted there.
			continue
		}
		o := out[prefix+kind]
		if o == nil {
			o = &observed{statuses: map[int]bool{}, errKeys: map[string]bool{}, fields: map[string]map[string]bool{}}
			out[prefix+kind] = o
		}
		o.statuses[x.Status] = true
		var body any
		if json.Unmarshal(x.RespBody, &body) != nil {
			if x.Status >= 400 {
				o.errKeys["(not JSON)"] = true
				o.note(firstLine(string(x.RespBody)))
			}
			continue
		}
		if x.Status >= 400 {
			if m, ok := body.(map[string]any); ok {
				for k, v := range m {
					o.errKeys[k] = true
					if d, ok := v.(map[string]any); ok {
						o.note(fmt.Sprint(d["message"]))
					}
				}
			}
			continue
		}
		flatten("", body, func(path, typ string) {
			if read(path) {
				if o.fields[path] == nil {
					o.fields[path] = map[string]bool{}
				}
				o.fields[path][typ] = true
			}
		})
	}
	return out
}

// note keeps an error message for the report, cut short, once.
func (o *observed) note(msg string) {
	if len(msg) > 160 {
		msg = msg[:160] + "…"
	}
	if !slices.Contains(o.messages, msg) {
		o.messages = append(o.messages, msg)
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// flatten walks a JSON value, calling fn with each path and its type;
// the keys of objects whose keys are data (addresses by network name,
// metadata) are "*", array elements "[]".
func flatten(path string, v any, fn func(path, typ string)) {
	switch x := v.(type) {
	case map[string]any:
		fn(path, "object")
		wild := strings.HasSuffix(path, ".addresses") || strings.HasSuffix(path, ".metadata")
		for k, e := range x {
			if wild {
				k = "*"
			}
			flatten(strings.TrimPrefix(path+"."+k, "."), e, fn)
		}
	case []any:
		fn(path, "array")
		for _, e := range x {
			flatten(path+"[]", e, fn)
		}
	case string:
		fn(path, "string")
	case float64:
		fn(path, "number")
	case bool:
		fn(path, "bool")
	case nil:
		fn(path, "null")
	}
}

// readFields are the response fields the provider (and gophercloud for
// it) reads: a server's, a list's links, a flavor's, an image's, the
// token's catalogue.
var readFields = regexp.MustCompile(`^(` + strings.Join([]string{
	`(server|servers\[\])(\.(id|name|status|OS-EXT-STS:task_state|created|tags|tags\[\]|metadata|metadata\.\*|fault|fault\.(code|message)|addresses|addresses\.\*|addresses\.\*\[\]|addresses\.\*\[\]\.(addr|version|OS-EXT-IPS:type)))?`,
	`servers_links(\[\](\.(href|rel))?)?`,
	`flavors(\[\](\.(id|name))?)?`, `flavors_links(\[\](\.(href|rel))?)?`,
	`images(\[\](\.(id|name|status))?)?`, `next`, `id`, `status`, `name`,
	`(port|ports\[\])(\.(id|name|description|device_id|fixed_ips|fixed_ips\[\]|fixed_ips\[\]\.(ip_address|subnet_id)))?`, `ports`,
	`subnets(\[\](\.(id|cidr|gateway_ip|dns_nameservers|dns_nameservers\[\]))?)?`,
	`token(\.(catalog|catalog\[\]|catalog\[\]\.(type|endpoints|endpoints\[\]|endpoints\[\]\.(url|region|region_id|interface))|expires_at))?`,
}, "|") + `)$`)

func read(path string) bool { return readFields.MatchString(path) }
