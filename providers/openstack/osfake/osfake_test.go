package osfake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"

	"github.com/egress-proxies/egress-proxies-operator/providers/openstack/osfake"
)

// The fake is tested through the real gophercloud client where the
// provider uses it, and with raw requests where the exact wire shape
// (status, headers, body) is the point.

func start(t *testing.T, adjust func(*osfake.Options)) (*osfake.Cloud, *gophercloud.ServiceClient) {
	t.Helper()
	opts := osfake.Options{AppCredentialID: "ac1", AppCredentialSecret: "s3cret", Username: "u", Password: "p", ProjectName: "demo"}
	if adjust != nil {
		adjust(&opts)
	}
	c := osfake.New(opts)
	t.Cleanup(c.Close)
	pc, err := openstack.NewClient(c.AuthURL())
	if err != nil {
		t.Fatal(err)
	}
	pc.HTTPClient = *c.Server.Client()
	err = openstack.Authenticate(context.Background(), pc, gophercloud.AuthOptions{IdentityEndpoint: c.AuthURL(), ApplicationCredentialID: "ac1", ApplicationCredentialSecret: "s3cret", AllowReauth: true})
	if err != nil {
		t.Fatal(err)
	}
	compute, err := openstack.NewComputeV2(pc, gophercloud.EndpointOpts{Region: "RegionOne"})
	if err != nil {
		t.Fatal(err)
	}
	compute.Microversion = "2.52"
	return c, compute
}

func create(t *testing.T, c *osfake.Cloud, compute *gophercloud.ServiceClient, name string, tags ...string) string {
	t.Helper()
	s, err := servers.Create(context.Background(), compute, servers.CreateOpts{
		Name: name, FlavorRef: "1", ImageRef: c.Options().Images[0].ID, Tags: tags,
		Networks: []servers.Network{{UUID: c.Options().Network.ID}}, UserData: []byte("#cloud-config\n"),
	}, nil).Extract()
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

func get(t *testing.T, compute *gophercloud.ServiceClient, id string) *servers.Server {
	t.Helper()
	s, err := servers.Get(context.Background(), compute, id).Extract()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBuildThenActiveWithAnAddress(t *testing.T) {
	c, compute := start(t, nil)
	id := create(t, c, compute, "web")
	// BuildDelay 0: the next request sees the build done.
	s := get(t, compute, id)
	if s.Status != "ACTIVE" || s.VmState != "active" || s.TaskState != "" || s.PowerState != servers.RUNNING {
		t.Fatalf("after the build: %s %s %q %d", s.Status, s.VmState, s.TaskState, s.PowerState)
	}
	if addrs, _ := s.Addresses["private"].([]any); len(addrs) != 1 {
		t.Errorf("addresses %v, want one on private", s.Addresses)
	}
	if s.Tags == nil || s.Created.IsZero() || s.Flavor["original_name"] != "m1.tiny" {
		t.Errorf("2.52 view lacks tags, created or the embedded flavor: %+v", s)
	}
}

func TestBuildLastsItsDelay(t *testing.T) {
	c, compute := start(t, func(o *osfake.Options) { o.BuildDelay = time.Hour })
	id := create(t, c, compute, "slow")
	if s := get(t, compute, id); s.Status != "BUILD" || s.TaskState != "spawning" || len(s.Addresses) != 0 {
		t.Errorf("within the delay: %s %q %v, want BUILD spawning without addresses", s.Status, s.TaskState, s.Addresses)
	}
	if err := c.FinishBuild(id); err != nil {
		t.Fatal(err)
	}
	if s := get(t, compute, id); s.Status != "ACTIVE" {
		t.Errorf("after FinishBuild: %s", s.Status)
	}
}

func TestDeleteIsAsynchronousAndIdempotent(t *testing.T) {
	c, compute := start(t, func(o *osfake.Options) { o.DeleteDelay = time.Hour })
	id := create(t, c, compute, "gone")
	for range 2 {
		if err := servers.Delete(context.Background(), compute, id).ExtractErr(); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	if s := get(t, compute, id); s.TaskState != "deleting" {
		t.Errorf("during the delete task_state is %q", s.TaskState)
	}
	c2, compute2 := start(t, nil)
	id2 := create(t, c2, compute2, "gone")
	if err := servers.Delete(context.Background(), compute2, id2).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	_, err := servers.Get(context.Background(), compute2, id2).Extract()
	var code gophercloud.ErrUnexpectedResponseCode
	if !gophercloud.ResponseCodeIs(err, 404) || !errors.As(err, &code) || !strings.Contains(string(code.Body), `"itemNotFound"`) {
		t.Errorf("get after the delete = %v, want 404 itemNotFound", err)
	}
}

func TestListFiltersOnTagsAndPages(t *testing.T) {
	c, compute := start(t, nil)
	a := create(t, c, compute, "a", "x", "y")
	b := create(t, c, compute, "b", "x")
	cc := create(t, c, compute, "c")
	for _, tc := range []struct {
		opts servers.ListOpts
		want []string
	}{
		{servers.ListOpts{Tags: "x,y"}, []string{a}},
		{servers.ListOpts{Tags: "x"}, []string{a, b}},
		{servers.ListOpts{TagsAny: "y,z"}, []string{a}},
		{servers.ListOpts{NotTags: "x,y"}, []string{b, cc}},
		{servers.ListOpts{NotTagsAny: "x"}, []string{cc}},
		{servers.ListOpts{Name: "^b$"}, []string{b}},
		{servers.ListOpts{Limit: 1}, []string{a, b, cc}},
	} {
		pages, err := servers.List(compute, tc.opts).AllPages(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got, _ := servers.ExtractServers(pages)
		ids := map[string]bool{}
		for _, s := range got {
			ids[s.ID] = true
		}
		if len(got) != len(tc.want) {
			t.Errorf("%+v: %d servers, want %d", tc.opts, len(got), len(tc.want))
		}
		for _, w := range tc.want {
			if !ids[w] {
				t.Errorf("%+v: missing %s", tc.opts, w)
			}
		}
	}
}

// raw sends one request with the token and returns status, headers and
// body.
func raw(t *testing.T, c *osfake.Cloud, compute *gophercloud.ServiceClient, method, path, version, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, compute.Endpoint+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", compute.TokenID)
	req.Header.Set("Content-Type", "application/json")
	if version != "" {
		req.Header.Set("OpenStack-API-Version", "compute "+version)
	}
	resp, err := c.Server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestMicroversions(t *testing.T) {
	c, compute := start(t, nil)
	status, h, _ := raw(t, c, compute, "GET", "servers", "2.52", "")
	if status != 200 || h.Get("OpenStack-API-Version") != "compute 2.52" || h.Get("X-OpenStack-Nova-API-Version") != "2.52" {
		t.Errorf("2.52: %d %v", status, h)
	}
	if status, h, _ := raw(t, c, compute, "GET", "servers", "", ""); status != 200 || h.Get("X-OpenStack-Nova-API-Version") != "2.1" {
		t.Errorf("no version asked: %d, served %q, want 2.1", status, h.Get("X-OpenStack-Nova-API-Version"))
	}
	if status, _, body := raw(t, c, compute, "GET", "servers", "2.200", ""); status != 406 || !strings.Contains(body, "Version 2.200 is not supported by the API. Minimum is 2.1 and maximum is 2.93.") {
		t.Errorf("2.200: %d %s", status, body)
	}
	create := fmt.Sprintf(`{"server": {"name": "t", "flavorRef": "1", "imageRef": %q, "networks": "none", "tags": ["a"]}}`, c.Options().Images[0].ID)
	if status, _, body := raw(t, c, compute, "POST", "servers", "2.51", create); status != 400 || !strings.Contains(body, "('tags' was unexpected)") {
		t.Errorf("tags on create at 2.51: %d %s", status, body)
	}
	if status, _, body := raw(t, c, compute, "GET", "servers/detail", "2.25", ""); status != 200 || strings.Contains(body, `"tags"`) {
		t.Errorf("2.25 shows tags: %s", body)
	}
}

func TestRequestValidation(t *testing.T) {
	c, compute := start(t, nil)
	img := c.Options().Images[0].ID
	body := func(extra string) string {
		return fmt.Sprintf(`{"server": {"name": "t", "flavorRef": "1", "imageRef": %q, "networks": "none"%s}}`, img, extra)
	}
	for _, tc := range []struct {
		name, body, want string
		status           int
	}{
		{"comma in a tag", body(`, "tags": ["a,b"]`), `does not match '^[^,/]*$'`, 400},
		{"61-character tag", body(`, "tags": ["` + strings.Repeat("t", 61) + `"]`), `is too long`, 400},
		{"user_data too long", body(`, "user_data": "` + strings.Repeat("QUFB", 16384) + `"`), `is too long`, 400},
		{"unknown flavor", strings.Replace(body(""), `"flavorRef": "1"`, `"flavorRef": "99"`, 1), "Flavor 99 could not be found.", 400},
		{"unknown image", strings.Replace(body(""), img, "00000000-0000-4000-8000-000000000000", 1), "Can not find requested image", 400},
		{"unknown zone", body(`, "availability_zone": "mars"`), "The requested availability zone is not available", 400},
		{"no networks", fmt.Sprintf(`{"server": {"name": "t", "flavorRef": "1", "imageRef": %q}}`, img), "'networks' is a required property", 400},
	} {
		status, _, got := raw(t, c, compute, "POST", "servers", "2.52", tc.body)
		if status != tc.status || !strings.Contains(got, tc.want) || !strings.Contains(got, `"badRequest"`) {
			t.Errorf("%s: %d %s", tc.name, status, got)
		}
	}
}

func TestQuotaAnswersWithNovasBody(t *testing.T) {
	c, compute := start(t, func(o *osfake.Options) { o.Quota = osfake.Quota{Instances: 1} })
	create(t, c, compute, "one")
	_, err := servers.Create(context.Background(), compute, servers.CreateOpts{Name: "two", FlavorRef: "1", ImageRef: c.Options().Images[0].ID, Networks: "none"}, nil).Extract()
	var code gophercloud.ErrUnexpectedResponseCode
	if !errors.As(err, &code) || code.Actual != 403 ||
		string(bytes.TrimSpace(code.Body)) != `{"forbidden":{"code":403,"message":"Quota exceeded for instances: Requested 1, but already used 1 of 1 instances"}}` {
		t.Errorf("create over the quota = %v", err)
	}
}

func TestTagsAndMetadata(t *testing.T) {
	c, compute := start(t, func(o *osfake.Options) { o.HoldBuilds = true })
	id := create(t, c, compute, "tagged", "a")
	if status, _, body := raw(t, c, compute, "PUT", "servers/"+id+"/tags/b", "2.52", ""); status != 409 || !strings.Contains(body, "while it is in vm_state building") || !strings.Contains(body, "Cannot 'update tag'") {
		t.Errorf("tag during the build: %d %s", status, body)
	}
	if err := c.FinishBuild(id); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := raw(t, c, compute, "PUT", "servers/"+id+"/tags/b", "2.52", ""); status != 201 {
		t.Errorf("add tag: %d", status)
	}
	if status, _, _ := raw(t, c, compute, "GET", "servers/"+id+"/tags/b", "2.52", ""); status != 204 {
		t.Errorf("check tag: %d", status)
	}
	if status, _, body := raw(t, c, compute, "GET", "servers/"+id+"/tags", "2.52", ""); status != 200 || !strings.Contains(body, `["a","b"]`) {
		t.Errorf("list tags: %d %s", status, body)
	}
	if status, _, body := raw(t, c, compute, "POST", "servers/"+id+"/metadata", "2.52", `{"metadata": {"k": "v"}}`); status != 200 || !strings.Contains(body, `"k":"v"`) {
		t.Errorf("set metadata: %d %s", status, body)
	}
}

func TestKeystoneAndGlance(t *testing.T) {
	c, compute := start(t, nil)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, c.AuthURL()+"/auth/tokens",
		strings.NewReader(`{"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "u", "domain": {"name": "Default"}, "password": "wrong"}}}, "scope": {"project": {"name": "demo", "domain": {"name": "Default"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	// As Keystone Zed answered on the real-cloud lane: flask's compact
	// JSON, and its own v3 endpoint in WWW-Authenticate.
	if resp.StatusCode != http.StatusUnauthorized || strings.TrimSpace(string(body)) != `{"error":{"code":401,"message":"The request you have made requires authentication.","title":"Unauthorized"}}` ||
		resp.Header.Get("WWW-Authenticate") != `Keystone uri="`+c.AuthURL()+`"` {
		t.Errorf("wrong password: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	image, err := openstack.NewImageV2(compute.ProviderClient, gophercloud.EndpointOpts{Region: "RegionOne"})
	if err != nil {
		t.Fatal(err)
	}
	pages, err := images.List(image, images.ListOpts{Name: "debian-12"}).AllPages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := images.ExtractImages(pages); len(got) != 1 || got[0].Status != images.ImageStatusActive {
		t.Errorf("images named debian-12: %+v", got)
	}
	if _, err := images.Get(context.Background(), image, "00000000-0000-4000-8000-000000000000").Extract(); !gophercloud.ResponseCodeIs(err, 404) {
		t.Errorf("a missing image = %v, want 404", err)
	}
}

func TestFaultHooks(t *testing.T) {
	c, compute := start(t, nil)
	c.FailNext("GET", `/servers/detail$`, 503, osfake.UnavailableBody)
	if _, err := servers.List(compute, nil).AllPages(context.Background()); !gophercloud.ResponseCodeIs(err, 503) {
		t.Errorf("injected 503 = %v", err)
	}
	c.DropNextResponse("POST", `/servers$`)
	_, err := servers.Create(context.Background(), compute, servers.CreateOpts{Name: "lost", FlavorRef: "1", ImageRef: c.Options().Images[0].ID, Networks: "none"}, nil).Extract()
	if err == nil || len(c.Servers()) != 1 {
		t.Errorf("a dropped answer = %v with %d servers, want an error and the server made", err, len(c.Servers()))
	}
	c.RejectCredentials(true)
	if _, err := servers.List(compute, nil).AllPages(context.Background()); err == nil {
		t.Error("calls pass with the credentials rejected")
	}
}

func TestCutCall(t *testing.T) {
	c, compute := start(t, nil)
	opts := servers.CreateOpts{Name: "cut", FlavorRef: "1", ImageRef: c.Options().Images[0].ID, Networks: "none"}
	c.CutCall(1, false)
	if _, err := servers.Create(context.Background(), compute, opts, nil).Extract(); !gophercloud.ResponseCodeIs(err, 502) || len(c.Servers()) != 0 {
		t.Errorf("a create cut before it arrived = %v with %d servers, want 502 and none", err, len(c.Servers()))
	}
	c.CutCall(1, true)
	if _, err := servers.Create(context.Background(), compute, opts, nil).Extract(); !gophercloud.ResponseCodeIs(err, 502) || len(c.Servers()) != 1 {
		t.Errorf("a create cut after it took effect = %v with %d servers, want 502 and one", err, len(c.Servers()))
	}
	// The second request from now is cut, the first is not.
	c.CutCall(2, false)
	id := c.Servers()[0].ID
	if _, err := servers.Get(context.Background(), compute, id).Extract(); err != nil {
		t.Errorf("the request before the cut one = %v", err)
	}
	if _, err := servers.Get(context.Background(), compute, id).Extract(); !gophercloud.ResponseCodeIs(err, 502) {
		t.Errorf("the cut request = %v, want 502", err)
	}
}

// A request the gate refuses is dropped unanswered, as by a load
// balancer that gave up on it: never the empty 200 net/http sends for a
// handler that wrote nothing (a refused HEAD /v3/auth/tokens read as a
// valid token).
func TestGateDropsUnanswered(t *testing.T) {
	c, _ := start(t, nil)
	c.SetGate(func(*http.Request) error { return errors.New("dropped") })
	req, err := http.NewRequestWithContext(t.Context(), http.MethodHead, c.AuthURL()+"/auth/tokens", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := c.Server.Client().Do(req); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("a HEAD the gate dropped was answered %s; want no answer", resp.Status)
	}
	c.SetGate(nil)
	get, err := http.NewRequestWithContext(t.Context(), http.MethodGet, c.AuthURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := c.Server.Client().Do(get); err != nil {
		t.Fatalf("a GET after the gate opened: %v", err)
	} else {
		_ = resp.Body.Close()
	}
}

func TestReset(t *testing.T) {
	c, compute := start(t, func(o *osfake.Options) { o.HoldBuilds = true })
	id := create(t, c, compute, "held")
	if _, err := c.HoldBuild(id); err != nil {
		t.Fatal(err)
	}
	c.FailNext("GET", `/servers/`, 503, osfake.UnavailableBody)
	c.CutCall(1, false)
	c.RejectCredentials(true)
	c.Reset()
	// RejectCredentials revoked the client's token; it logs in again, and
	// Keystone accepts it.
	if s := get(t, compute, id); s.Status != "BUILD" || s.Locked == nil || *s.Locked {
		t.Errorf("after Reset the held build is %s, locked %v; want BUILD, unlocked", s.Status, s.Locked)
	}
	if _, err := c.BeginDelete(id); err != nil {
		t.Fatal(err)
	}
	c.Reset()
	if _, err := servers.Get(context.Background(), compute, id).Extract(); !gophercloud.ResponseCodeIs(err, 404) {
		t.Errorf("a held delete after Reset = %v, want 404 (DeleteDelay 0)", err)
	}
}

// TestCreateSchemaIsNovas sends the create bodies Nova's own request
// schema refuses (nova/api/openstack/compute/schemas/servers.py create_v252,
// nova/api/validation/parameter_types.py metadata, tag, name) and a few it
// takes, with the message nova/api/validation/validators.py
// _SchemaValidator.validate writes: the last element of the error's path,
// the value, jsonschema's message.
func TestCreateSchemaIsNovas(t *testing.T) {
	c, compute := start(t, nil)
	img := c.Options().Images[0].ID
	body := func(extra string) string {
		return fmt.Sprintf(`{"server": {"name": "t", "flavorRef": "1", "imageRef": %q, "networks": "none"%s}}`, img, extra)
	}
	cases := []struct {
		name, body, want string
		status           int
	}{
		{"metadata key with a slash", body(`, "metadata": {"egressproxies.io/managed": "o"}`), `Invalid input for field/attribute metadata. Value: {'egressproxies.io/managed': 'o'}. 'egressproxies.io/managed' does not match any of the regexes: '^[a-zA-Z0-9-_:. ]{1,255}$'`, 400},
		{"the old marks", body(`, "metadata": {"egressproxies.io/managed": "o", "egressproxies.io/proxy-uid": "u"}`), `Invalid input for field/attribute metadata. Value: {'egressproxies.io/managed': 'o', 'egressproxies.io/proxy-uid': 'u'}. 'egressproxies.io/managed', 'egressproxies.io/proxy-uid' do not match any of the regexes: '^[a-zA-Z0-9-_:. ]{1,255}$'`, 400},
		{"empty metadata key", body(`, "metadata": {"": "o"}`), `Invalid input for field/attribute metadata. Value: {'': 'o'}. '' does not match any of the regexes`, 400},
		{"metadata value of 256", body(`, "metadata": {"k": "` + strings.Repeat("v", 256) + `"}`), `is too long`, 400},
		{"metadata value not a string", body(`, "metadata": {"k": 1}`), `Invalid input for field/attribute k. Value: 1. 1 is not of type 'string'`, 400},
		{"metadata key with a colon", body(`, "metadata": {"egressproxies.io:managed": "o", "a b_c-d.e": ""}`), `"server"`, 202},
		{"empty tag", body(`, "tags": [""]`), `Invalid input for field/attribute 0. Value: . '' is too short`, 400},
		{"slash in a tag", body(`, "tags": ["a/b"]`), `Invalid input for field/attribute 0. Value: a/b. 'a/b' does not match '^[^,/]*$'`, 400},
		{"51 tags", body(`, "tags": ["t"` + strings.Repeat(`, "t"`, 50) + `]`), `is too long`, 400},
		{"name with a leading space", strings.Replace(body(""), `"name": "t"`, `"name": " t"`, 1), `An invalid 'name' value was provided. The name must be: printable characters. Can not start or end with whitespace.`, 400},
		{"empty name", strings.Replace(body(""), `"name": "t"`, `"name": ""`, 1), `Invalid input for field/attribute name. Value: . '' is too short`, 400},
		{"network uuid not a UUID", strings.Replace(body(""), `"networks": "none"`, `"networks": [{"uuid": "x"}]`, 1), `Invalid input for field/attribute networks. Value: [{'uuid': 'x'}]. [{'uuid': 'x'}] is not valid under any of the given schemas`, 400},
		{"user_data not base64", body(`, "user_data": "abc"`), `Invalid input for field/attribute user_data. Value: abc. 'abc' is not a 'base64'`, 400},
		{"personality at 2.52", body(`, "personality": []`), `"server"`, 202},
		{"hostname at 2.52", body(`, "hostname": "h"`), `('hostname' was unexpected)`, 400},
		{"unknown top-level key", strings.Replace(body(""), `{"server"`, `{"srv": {}, "server"`, 1), `Additional properties are not allowed ('srv' was unexpected)`, 400},
	}
	var bodies []string
	for _, tc := range cases {
		bodies = append(bodies, tc.body)
	}
	nova, ok, err := osfake.NovaCreateSchema(t.Context(), bodies)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Log("Nova's Python code is not installed; not comparing with its validator")
	}
	for i, tc := range cases {
		status, _, got := raw(t, c, compute, "POST", "servers", "2.52", tc.body)
		if status != tc.status || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %d %s\nwant %d with %s", tc.name, status, got, tc.status, tc.want)
		}
		if nova == nil {
			continue
		}
		// Nova's own validator on the same body: the same verdict and,
		// for a 400, the same message.
		detail := nova[i]
		var fault struct {
			BadRequest struct{ Message string } `json:"badRequest"`
		}
		_ = json.Unmarshal([]byte(got), &fault)
		if (detail == "") != (status == 202) || (detail != "" && detail != fault.BadRequest.Message) {
			t.Errorf("%s: Nova's validator says %q, the fake %d %q", tc.name, detail, status, fault.BadRequest.Message)
		}
	}
}

// TestPagesAsNovaDoes: a page holds at most [api]max_limit servers, and a
// full page links to the next one even when it is the last
// (nova/api/openstack/common.py get_limit_and_marker,
// ViewBuilder._get_collection_links).
func TestPagesAsNovaDoes(t *testing.T) {
	c, compute := start(t, func(o *osfake.Options) { o.MaxLimit = 2 })
	for _, n := range []string{"a", "b", "c", "d"} {
		create(t, c, compute, n, "x")
	}
	path := "servers/detail?tags=x"
	var sizes []int
	for path != "" && len(sizes) < 5 {
		status, _, body := raw(t, c, compute, "GET", path, "2.52", "")
		var page struct {
			Servers []struct{ ID string }
			Links   []struct{ Rel, Href string } `json:"servers_links"`
		}
		if err := json.Unmarshal([]byte(body), &page); status != 200 || err != nil {
			t.Fatalf("GET %s: %d %s", path, status, body)
		}
		sizes = append(sizes, len(page.Servers))
		path = ""
		for _, l := range page.Links {
			if l.Rel == "next" {
				path = strings.TrimPrefix(l.Href, compute.Endpoint)
			}
		}
	}
	if fmt.Sprint(sizes) != "[2 2 0]" {
		t.Errorf("pages of %v servers, want [2 2 0] (a full page links on)", sizes)
	}
	if status, _, body := raw(t, c, compute, "GET", "servers?limit=5", "2.52", ""); status != 200 || !strings.Contains(body, `"servers_links"`) || strings.Count(body, `"id"`) != 2 {
		t.Errorf("limit above max_limit: %d %s, want a page of 2 with a next link", status, body)
	}
}

// TestDeleteChecksOnlyTheLock: Nova deletes a server in any state, a
// building one included, and refuses only a locked one (nova/compute/api.py
// delete: check_instance_lock, check_instance_state(vm_state=None,
// task_state=None, must_have_launched=False)).
func TestDeleteChecksOnlyTheLock(t *testing.T) {
	c, compute := start(t, func(o *osfake.Options) { o.HoldBuilds = true; o.DeleteDelay = time.Hour })
	building := create(t, c, compute, "building")
	if _, err := c.HoldBuild(building); err != nil {
		t.Fatal(err)
	}
	if status, _, body := raw(t, c, compute, "DELETE", "servers/"+building, "2.52", ""); status != 204 {
		t.Errorf("delete of a spawning server: %d %s, want 204", status, body)
	}
	locked := create(t, c, compute, "locked")
	unlock, err := c.LockServer(locked)
	if err != nil {
		t.Fatal(err)
	}
	if s := get(t, compute, locked); s.Locked == nil || !*s.Locked {
		t.Errorf("a locked server shows locked %v", s.Locked)
	}
	want := `{"conflictingRequest":{"code":409,"message":"Instance ` + locked + ` is locked"}}`
	if status, _, body := raw(t, c, compute, "DELETE", "servers/"+locked, "2.52", ""); status != 409 || strings.TrimSpace(body) != want {
		t.Errorf("delete of a locked server: %d %s, want 409 %s", status, body, want)
	}
	unlock()
	if status, _, body := raw(t, c, compute, "DELETE", "servers/"+locked, "2.52", ""); status != 204 {
		t.Errorf("delete once unlocked: %d %s, want 204", status, body)
	}
}

// TestDeleteWhileSchedulingComesBack plays Nova's race: a server deleted
// while its build request stands is answered 204 and reads 404, then,
// once the scheduler answers, reads BUILD (scheduling) from its cell until
// the conductor destroys it (nova/compute/api.py _delete_while_booting,
// _get_instance; nova/conductor/manager.py _delete_build_request).
func TestDeleteWhileSchedulingComesBack(t *testing.T) {
	c, compute := start(t, func(o *osfake.Options) { o.HoldScheduling, o.BuildDelay, o.DeleteDelay = true, time.Hour, time.Hour })
	id := create(t, c, compute, "scheduling")
	if s := get(t, compute, id); s.Status != "BUILD" || s.TaskState != "scheduling" {
		t.Fatalf("a held server reads %s %q, want BUILD scheduling", s.Status, s.TaskState)
	}
	if status, _, body := raw(t, c, compute, "DELETE", "servers/"+id, "2.52", ""); status != 204 {
		t.Fatalf("delete of a scheduling server: %d %s, want 204", status, body)
	}
	if status, _, body := raw(t, c, compute, "GET", "servers/"+id, "2.52", ""); status != 404 {
		t.Errorf("GET after the build request's delete: %d %s, want 404", status, body)
	}
	if err := c.PlaceServer(id); err != nil {
		t.Fatal(err)
	}
	if s := get(t, compute, id); s.Status != "BUILD" || s.TaskState != "scheduling" {
		t.Errorf("once the conductor wrote it: %s %q, want BUILD scheduling", s.Status, s.TaskState)
	}

	placed := create(t, c, compute, "placed")
	if err := c.PlaceServer(placed); err != nil {
		t.Fatal(err)
	}
	if s := get(t, compute, placed); s.Status != "BUILD" || s.TaskState != "spawning" {
		t.Errorf("a placed server reads %s %q, want BUILD spawning", s.Status, s.TaskState)
	}
	if status, _, body := raw(t, c, compute, "DELETE", "servers/"+placed, "2.52", ""); status != 204 {
		t.Fatalf("delete of a placed server: %d %s, want 204", status, body)
	}
	if s := get(t, compute, placed); s.TaskState != "deleting" {
		t.Errorf("a placed server deleted reads task_state %q, want deleting", s.TaskState)
	}
}

// TestRevokedTokenIsRefused: DELETE /v3/auth/tokens revokes the subject
// token (204; an unknown one is 404 TokenNotFound), and Nova then answers
// it with keystonemiddleware's 401 and its WWW-Authenticate header.
func TestRevokedTokenIsRefused(t *testing.T) {
	c, compute := start(t, nil)
	revoke := func(subject string) (int, string) {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodDelete, c.AuthURL()+"/auth/tokens", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Auth-Token", compute.TokenID)
		req.Header.Set("X-Subject-Token", subject)
		resp, err := c.Server.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := revoke("0123"); status != 404 || strings.TrimSpace(body) != `{"error":{"code":404,"message":"Could not recognize Fernet token","title":"Not Found"}}` {
		t.Errorf("revoke an unknown token: %d %s", status, body)
	}
	if status, body := revoke(compute.TokenID); status != 204 {
		t.Fatalf("revoke the own token: %d %s", status, body)
	}
	status, h, body := raw(t, c, compute, "GET", "servers", "2.52", "")
	if status != 401 || !strings.HasPrefix(h.Get("WWW-Authenticate"), `Keystone uri="`) ||
		body != `{"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}}` {
		t.Errorf("Nova with a revoked token: %d %v %s", status, h, body)
	}
	// gophercloud logs in again on the 401 (AllowReauth) and retries.
	if _, err := servers.List(compute, nil).AllPages(context.Background()); err != nil {
		t.Errorf("gophercloud after the revocation: %v", err)
	}
}
