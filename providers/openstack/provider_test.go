package openstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/providers/openstack/osfake"
)

// testOwner is the install and entry the tests' requests name (§8).
const testOwner = "c0ffee12-lab"

func request(name string) contract.CreateRequest {
	return contract.CreateRequest{
		Name: name, UID: "5f1d7c2e-8a4b-4c3d-9e2f-0a1b2c3d4e5f", Owner: testOwner, Port: 3128,
		Placement: contract.Placement{Region: "one", Zone: "az1", MachineType: "small", Image: "debian-12"},
		CloudInit: []byte("#cloud-config\n"),
	}
}

func named(c *cloud, name string) []osfake.ServerInfo {
	var out []osfake.ServerInfo
	for _, s := range c.fake.Servers() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// A crash between Nova's create and the operator's status write: the
// create's answer is lost, the operator restarts (a new provider) and
// calls Create again. It finds the server by name and marks and makes no
// second one.
func TestCreateAfterCrashDoesNotDuplicate(t *testing.T) {
	c := startCloud(t)
	ctx := context.Background()
	req := request("proxy-crash")
	c.fake.DropNextResponse("POST", `/servers$`)
	if _, err := c.provider(t).Create(ctx, req); err == nil || contract.ClassOf(err) != contract.ClassTransient {
		t.Fatalf("Create with the answer lost = %v, want a transient error", err)
	}
	if got := named(c, req.Name); len(got) != 1 {
		t.Fatalf("after the lost answer Nova holds %d servers named %s, want the 1 it made", len(got), req.Name)
	}
	inst, err := c.provider(t).Create(ctx, req)
	if err != nil {
		t.Fatalf("Create after the restart: %v", err)
	}
	got := named(c, req.Name)
	if len(got) != 1 {
		t.Fatalf("Nova holds %d servers named %s, want 1", len(got), req.Name)
	}
	if inst.ProviderID != "one/"+got[0].ID || inst.UID != req.UID {
		t.Errorf("Create returned %+v, want one/%s with UID %s", inst, got[0].ID, req.UID)
	}
}

// The server carries the marks as tags (filterable) and as metadata.
func TestCreateMarksTheServer(t *testing.T) {
	c := startCloud(t)
	req := request("proxy-marks")
	if _, err := c.provider(t).Create(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	s := named(c, req.Name)[0]
	for _, tag := range []string{"egressproxies-managed", "egressproxies-owner-" + req.Owner, "egressproxies-uid-" + req.UID} {
		if !strings.Contains(strings.Join(s.Tags, ","), tag) || len(tag) > 60 {
			t.Errorf("tags %v: missing or too long %q", s.Tags, tag)
		}
	}
	// Nova's metadata keys cannot hold "/" (the fake enforces its schema).
	want := map[string]string{"egressproxies.io:managed": req.Owner, "egressproxies.io:proxy-uid": req.UID}
	if !maps.Equal(s.Metadata, want) {
		t.Errorf("metadata %v, want %v", s.Metadata, want)
	}
}

// A create over the instance quota: Nova's 403 reaches the caller as
// ErrQuota with Nova's own error still inside.
func TestQuotaIsErrQuota(t *testing.T) {
	c := startCloud(t)
	c.fake.SetQuota(osfake.Quota{Instances: 1})
	p := c.provider(t)
	ctx := context.Background()
	if _, err := p.Create(ctx, request("proxy-first")); err != nil {
		t.Fatal(err)
	}
	second := request("proxy-second")
	second.UID = "7a2c1d3e-4b5f-4a6b-8c7d-9e0f1a2b3c4d"
	_, err := p.Create(ctx, second)
	var code gophercloud.ErrUnexpectedResponseCode
	if !errors.Is(err, contract.ErrQuota) || !errors.As(err, &code) || code.Actual != 403 ||
		!bytes.Contains(code.Body, []byte("Quota exceeded for instances: Requested 1, but already used 1 of 1 instances")) {
		t.Fatalf("Create over the quota = %v, want ErrQuota around Nova's 403", err)
	}
	if len(named(c, second.Name)) != 0 {
		t.Error("a server was made over the quota")
	}
}

// A build the scheduler cannot place ends in ERROR with the NoValidHost
// fault: Get reports ErrQuota and deletes the dead server, so the
// operator, after its quota back-off, finds it gone and creates again.
func TestNoValidHostIsErrQuota(t *testing.T) {
	c := startCloud(t, func(o *osfake.Options) { o.HoldBuilds = true })
	p := c.provider(t)
	ctx := context.Background()
	c.fake.FailNextBuild(osfake.NoValidHost)
	inst, err := p.Create(ctx, request("proxy-novalidhost"))
	if err != nil || inst.State != contract.StateProvisioning {
		t.Fatalf("Create = %+v, %v; want Provisioning", inst, err)
	}
	_, id, _ := ids.Parse(inst.ProviderID)
	if err := c.fake.FinishBuild(id); err != nil {
		t.Fatal(err)
	}
	_, err = p.Get(ctx, inst.ProviderID)
	var fault *FaultError
	if !errors.Is(err, contract.ErrQuota) || !errors.As(err, &fault) || !strings.Contains(err.Error(), "No valid host was found") {
		t.Fatalf("Get of the failed build = %v, want ErrQuota with the fault", err)
	}
	if s, ok := c.fake.Lookup(id); ok && s.TaskState != "deleting" {
		t.Errorf("the ERROR server was left as it was: %+v", s)
	}
	// Create, too, meets a failed build as ErrQuota when its own read
	// comes after the build.
	c.fake.FailNextBuild(osfake.NoValidHost)
	c2 := startCloud(t)
	c2.fake.FailNextBuild(osfake.NoValidHost)
	if _, err := c2.provider(t).Create(ctx, request("proxy-novalidhost")); !errors.Is(err, contract.ErrQuota) {
		t.Errorf("Create whose read-back finds NoValidHost = %v, want ErrQuota", err)
	}
}

// A CloudInit at Nova's limit goes through byte for byte; one byte more is
// refused naming the field, before any call.
func TestCloudInitLimit(t *testing.T) {
	c := startCloud(t)
	p := c.provider(t)
	ctx := context.Background()
	req := request("proxy-big")
	req.CloudInit = bytes.Repeat([]byte("#\xff\r\n"), MaxCloudInit/4+1)[:MaxCloudInit]
	if _, err := p.Create(ctx, req); err != nil {
		t.Fatalf("Create with %d bytes of CloudInit: %v", len(req.CloudInit), err)
	}
	if got := named(c, req.Name)[0].UserData; !bytes.Equal(got, req.CloudInit) {
		t.Error("the user_data Nova keeps is not the CloudInit")
	}
	big := request("proxy-bigger")
	big.CloudInit = make([]byte, MaxCloudInit+1)
	before := c.fake.Calls()
	_, err := p.Create(ctx, big)
	var fe *contract.FieldError
	if !errors.As(err, &fe) || fe.Field != "cloudInit" || !errors.Is(err, contract.ErrPermanent) {
		t.Errorf("Create with %d bytes = %v, want a cloudInit field error", len(big.CloudInit), err)
	}
	if c.fake.Calls() != before {
		t.Error("the oversized request reached the cloud")
	}
}

// A UID too long for a Nova tag is refused naming the field.
func TestUIDMustFitATag(t *testing.T) {
	c := startCloud(t)
	req := request("proxy-uid")
	req.UID = strings.Repeat("a", maxUID+1)
	var fe *contract.FieldError
	if _, err := c.provider(t).Create(context.Background(), req); !errors.As(err, &fe) || fe.Field != "uid" {
		t.Errorf("Create with a %d-character UID = %v, want a uid field error", len(req.UID), err)
	}
}

// The clouds file is read again when it changes: a wrong credential is
// replaced by the right one without a new provider (contract §7).
func TestCredentialRotation(t *testing.T) {
	c := startCloud(t)
	c.writeClouds(t, appCredClouds(c.fake.AuthURL(), "an-old-secret"))
	p := c.provider(t)
	ctx := context.Background()
	_, err := p.ListByTag(ctx, contract.LabelManaged, testOwner)
	if !errors.Is(err, contract.ErrPermanent) || strings.Contains(err.Error(), "an-old-secret") {
		t.Fatalf("ListByTag with a refused credential = %v, want ErrPermanent without the secret", err)
	}
	if r := p.Check(ctx)[0]; r.Target != "credentials" || r.Reason != contract.ReasonUnauthenticated {
		t.Errorf("Check with a refused credential = %+v, want credentials Unauthenticated", r)
	}
	c.writeClouds(t, passwordClouds(c.fake.AuthURL(), testPassword))
	if _, err := p.ListByTag(ctx, contract.LabelManaged, testOwner); err != nil {
		t.Fatalf("ListByTag after the rotation: %v", err)
	}
	if r := p.Check(ctx)[0]; !r.OK || r.Details["method"] != "password" {
		t.Errorf("Check after the rotation = %+v, want credentials OK by password", r)
	}
}

// An expired token is renewed by gophercloud without the caller noticing.
func TestExpiredTokenIsRenewed(t *testing.T) {
	c := startCloud(t)
	p := c.provider(t)
	ctx := context.Background()
	if _, err := p.ListByTag(ctx, contract.LabelManaged, testOwner); err != nil {
		t.Fatal(err)
	}
	c.fake.ExpireTokens()
	if _, err := p.ListByTag(ctx, contract.LabelManaged, testOwner); err != nil {
		t.Errorf("ListByTag after the token expired: %v", err)
	}
}

// ListByTag covers every configured region.
func TestListByTagCoversEveryRegion(t *testing.T) {
	c := startCloud(t)
	p := c.provider(t)
	ctx := context.Background()
	a, b := request("proxy-a"), request("proxy-b")
	b.Placement.Region, b.Placement.Zone = "two", ""
	b.UID = "7a2c1d3e-4b5f-4a6b-8c7d-9e0f1a2b3c4d"
	for _, req := range []contract.CreateRequest{a, b} {
		if _, err := p.Create(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	got, err := p.ListByTag(ctx, contract.LabelManaged, testOwner)
	if err != nil || len(got) != 2 || !strings.HasPrefix(got[0].ProviderID, "one/") || !strings.HasPrefix(got[1].ProviderID, "two/") {
		t.Errorf("ListByTag = %+v, %v; want one server in each region", got, err)
	}
}

// A region the catalogue does not list is a permanent error, and the
// Checker calls it misconfigured; a used-up quota shows in the Checker.
func TestCheckerReportsRegionsAndQuota(t *testing.T) {
	c := startCloud(t)
	c.cfg.Regions["three"] = Region{Name: "RegionThree", Network: c.cfg.Regions["one"].Network, Zones: map[string]string{"az1": "az1"}}
	p := c.provider(t)
	ctx := context.Background()
	req := request("proxy-three")
	req.Placement.Region = "three"
	if _, err := p.Create(ctx, req); !errors.Is(err, contract.ErrPermanent) || !strings.Contains(err.Error(), "RegionThree") {
		t.Errorf("Create in a region the catalogue lacks = %v, want ErrPermanent naming it", err)
	}
	c.fake.SetQuota(osfake.Quota{Instances: 1})
	if _, err := p.Create(ctx, request("proxy-one")); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, r := range p.Check(ctx) {
		reasons[r.Target] = r.Reason
	}
	for target, want := range map[string]string{
		"credentials": contract.ReasonOK, "region/one": contract.ReasonQuotaExceeded, "region/one/zone/az2": contract.ReasonOK,
		"region/one/image/debian-12": contract.ReasonOK, "region/three": contract.ReasonMisconfigured,
	} {
		if reasons[target] != want {
			t.Errorf("Check %s = %q, want %q (all: %v)", target, reasons[target], want, reasons)
		}
	}
}

// A build that fails for a reason other than capacity (here the compute
// host's BuildAbortException for a flavor disk smaller than the image,
// nova/compute/manager.py _build_and_run_instance) fails again the same
// way: Get and Create report it as ErrPermanent with Nova's fault and
// delete the dead server, so the operator shows the fault and tries again
// only after its long permanent wait, instead of replacing the server in
// a loop. A server that ran and then went to ERROR is Stopped: replaced.
func TestBuildFailureIsPermanent(t *testing.T) {
	c := startCloud(t, func(o *osfake.Options) { o.HoldBuilds = true })
	p := c.provider(t)
	ctx := context.Background()
	req := request("proxy-failed")
	const fault = "Build of instance 3f2a aborted: Flavor's disk is too small for requested image. Flavor disk is 1073741824 bytes, image is 2147483648 bytes."
	for _, via := range []string{"Get", "Create"} {
		c.fake.FailNextBuild(fault)
		inst, err := p.Create(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		_, id, _ := ids.Parse(inst.ProviderID)
		if err := c.fake.FinishBuild(id); err != nil {
			t.Fatal(err)
		}
		if via == "Get" {
			_, err = p.Get(ctx, inst.ProviderID)
		} else {
			_, err = p.Create(ctx, req)
		}
		var fe *FaultError
		if !errors.Is(err, contract.ErrPermanent) || !errors.As(err, &fe) || !strings.Contains(err.Error(), fault) {
			t.Errorf("%s of the failed build = %v; want ErrPermanent with Nova's fault", via, err)
		}
		if s, ok := c.fake.Lookup(id); ok && s.TaskState != "deleting" {
			t.Errorf("%s left the ERROR server as it was: %+v", via, s)
		}
		_ = c.fake.RemoveServer(id) // the delete's end, if it has not come
	}
	inst, err := p.Create(ctx, req)
	if err != nil || inst.State != contract.StateProvisioning {
		t.Fatalf("the next Create = %+v, %v; want a fresh server", inst, err)
	}
	_, id, _ := ids.Parse(inst.ProviderID)
	if err := c.fake.FinishBuild(id); err != nil {
		t.Fatal(err)
	}
	if err := c.fake.SetStatus(id, "ERROR", "error", ""); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Get(ctx, inst.ProviderID); err != nil || got.State != contract.StateStopped {
		t.Errorf("Get of a server that ran and went to ERROR = %+v, %v; want Stopped", got, err)
	}
}

// While one call waits for a hanging Keystone to log in, another whose
// ctx is done returns at once instead of queueing behind it (§1.5).
func TestCallsDoNotQueueBehindALogin(t *testing.T) {
	c := startCloud(t)
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	c.fake.SetGate(func(r *http.Request) error {
		if strings.HasPrefix(r.URL.Path, "/identity/") {
			select {
			case entered <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		return nil
	})
	c.cfg.CallTimeout = contract.Duration{Duration: 30 * time.Second}
	p := c.provider(t)
	first := make(chan error, 1)
	go func() {
		_, err := p.ListByTag(context.Background(), contract.LabelManaged, testOwner)
		first <- err
	}()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	returned := make(chan error, 1)
	go func() {
		_, err := p.Get(ctx, "one/9b7c1c42-5c0e-4d0b-a0f6-46a4b8a5e0f3")
		returned <- err
	}()
	select {
	case err := <-returned:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Get with a cancelled ctx = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("Get with a cancelled ctx waited behind the login")
	}
	close(release)
	if err := <-first; err != nil {
		t.Errorf("the call that logged in: %v", err)
	}
}

// A Create that waits for another Create of the same request (they take
// turns, so Nova gets one server) gives up as soon as its ctx ends.
func TestCreateWaitingForItsTwinReturnsOnCancel(t *testing.T) {
	c := startCloud(t)
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	c.fake.SetGate(func(r *http.Request) error {
		if strings.HasSuffix(r.URL.Path, "/servers/detail") {
			select {
			case entered <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		return nil
	})
	c.cfg.CallTimeout = contract.Duration{Duration: 30 * time.Second}
	p := c.provider(t)
	req := request("twin")
	first := make(chan error, 1)
	go func() {
		_, err := p.Create(context.Background(), req)
		first <- err
	}()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Create(ctx, req); !errors.Is(err, context.Canceled) || contract.ClassOf(err) != contract.ClassTransient {
		t.Errorf("the twin Create with a cancelled ctx = %v (class %s), want a transient error wrapping context.Canceled", err, contract.ClassOf(err))
	}
	var err error
	select {
	case err = <-first:
		t.Errorf("the twin Create returned only after the first finished (%v): it waited for the lock despite its ctx", err)
	default:
		close(release)
		err = <-first
	}
	if err != nil {
		t.Errorf("the first Create: %v", err)
	}
	if n := len(c.fake.Servers()); n != 1 {
		t.Errorf("Nova holds %d servers, want 1", n)
	}
}

// The harness cuts the calls of a Create on a provider that has logged in
// and looked its flavor and image up. A fresh provider's first Create also
// logs in, reads Glance's version document and looks both up: each of its
// calls cut, before it arrived and after it took effect, is resumed by the
// next Create, from another fresh provider, into one server carrying the
// request's cloud-init.
func TestCreateResumesFromAColdStart(t *testing.T) {
	c := startCloud(t)
	ctx := context.Background()
	before := c.fake.Calls()
	if _, err := c.provider(t).Create(ctx, request("proxy-cold")); err != nil {
		t.Fatal(err)
	}
	steps := c.fake.Calls() - before
	t.Logf("a cold Create makes %d calls", steps)
	if steps < 7 {
		t.Fatalf("a cold Create made %d calls, want login, Glance's version document, list, flavors, images, create and read", steps)
	}
	for n := 1; n <= steps; n++ {
		for i, after := range []bool{false, true} {
			req := request(fmt.Sprintf("proxy-cold-%d-%d", n, i))
			req.UID = fmt.Sprintf("5f1d7c2e-8a4b-4c3d-9e2f-%012d", 2*n+i)
			c.fake.CutCall(n, after)
			if _, err := c.provider(t).Create(ctx, req); err != nil && contract.ClassOf(err) != contract.ClassTransient {
				t.Errorf("call %d of %d cut (after %v): Create = %v (class %s), want success or transient", n, steps, after, err, contract.ClassOf(err))
			}
			c.fake.Reset()
			inst, err := c.provider(t).Create(ctx, req)
			if err != nil {
				t.Errorf("call %d of %d cut (after %v): the next Create = %v", n, steps, after, err)
				continue
			}
			got := named(c, req.Name)
			if len(got) != 1 || inst.ProviderID != "one/"+got[0].ID || !bytes.Equal(got[0].UserData, req.CloudInit) {
				t.Errorf("call %d of %d cut (after %v): Nova holds %d servers named %s, Create returned %s", n, steps, after, len(got), req.Name, inst.ProviderID)
			}
		}
	}
}

// A server someone locked refuses its delete with 409 until a person
// unlocks it (nova/compute/api.py check_instance_lock): Delete reports it
// as ErrPermanent, not as a conflict that passes, and deletes the server
// once it is unlocked.
func TestDeleteOfALockedServerIsPermanent(t *testing.T) {
	c := startCloud(t)
	p := c.provider(t)
	ctx := context.Background()
	inst, err := p.Create(ctx, request("proxy-locked"))
	if err != nil {
		t.Fatal(err)
	}
	_, id, _ := ids.Parse(inst.ProviderID)
	unlock, err := c.fake.LockServer(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx, inst.ProviderID); !errors.Is(err, contract.ErrPermanent) || !strings.Contains(err.Error(), "is locked") {
		t.Errorf("Delete of a locked server = %v, want ErrPermanent saying it is locked", err)
	}
	unlock()
	if err := p.Delete(ctx, inst.ProviderID); err != nil {
		t.Errorf("Delete once unlocked = %v", err)
	}
}

// On a cloud that keeps deleted servers for a while ([DEFAULT]
// reclaim_instance_interval > 0), Nova's delete is a soft delete
// (compute/servers.py _delete calls compute_api.soft_delete): the server
// stays listed, tags and all, as SOFT_DELETED with no task. Create must
// not resume it as the Proxy's server: it boots a fresh one.
func TestCreateDoesNotResumeASoftDeletedServer(t *testing.T) {
	c := startCloud(t)
	p := c.provider(t)
	ctx := context.Background()
	req := request("proxy-soft")
	old, err := p.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	_, id, _ := ids.Parse(old.ProviderID)
	if err := c.fake.SetStatus(id, "SOFT_DELETED", "soft-delete", ""); err != nil {
		t.Fatal(err)
	}
	inst, err := p.Create(ctx, req)
	if err != nil || inst.ProviderID == old.ProviderID || inst.State == contract.StateTerminated {
		t.Errorf("Create over a soft-deleted server = %+v, %v; want a fresh server", inst, err)
	}
}

// An image rotated under its name (the old one deleted, a new one
// uploaded) leaves the provider's cached ID stale: Nova refuses the create
// with 400 "Can not find requested image" (servers.py create,
// ImageNotFound). Create looks the name up again and, finding another ID,
// submits once more, rather than returning a permanent error the operator
// would wait 30 minutes on.
func TestCreateFollowsARotatedImage(t *testing.T) {
	c := startCloud(t)
	p := c.provider(t)
	ctx := context.Background()
	if _, err := p.Create(ctx, request("proxy-before")); err != nil {
		t.Fatal(err)
	}
	newID, err := c.fake.ReplaceImage("debian-12")
	if err != nil {
		t.Fatal(err)
	}
	req := request("proxy-after")
	req.UID = "6e2d8c1a-9b3f-4e5d-8a7c-1b2c3d4e5f60"
	if _, err := p.Create(ctx, req); err != nil {
		t.Fatalf("Create after the image was rotated = %v, want the new image used", err)
	}
	for _, s := range c.fake.Servers() {
		if s.Name == req.Name && s.ImageID != newID {
			t.Errorf("server %s boots image %s, want the new %s", s.Name, s.ImageID, newID)
		}
	}
}

// TestDeleteWaitsForTheScheduler: a server deleted while Nova is still
// scheduling it reads gone, then BUILD again once the conductor writes it
// to its cell, until the conductor destroys it (osfake plays the race:
// PlaceServer). Delete waits for the scheduler instead, so that Get after
// Delete never finds the server live (contract §4.9); past callTimeout it
// returns a transient error. The old Delete returned nil at once and the
// Get below read Provisioning.
func TestDeleteWaitsForTheScheduler(t *testing.T) {
	defer func(old time.Duration) { schedulingPoll = old }(schedulingPoll)
	schedulingPoll = time.Millisecond
	c := startCloud(t, func(o *osfake.Options) { o.HoldScheduling, o.DeleteDelay = true, time.Hour })
	p := c.provider(t)
	ctx := context.Background()
	inst, err := p.Create(ctx, request("proxy-scheduling"))
	if err != nil {
		t.Fatal(err)
	}
	_, id, _ := ids.Parse(inst.ProviderID)
	done := make(chan error, 1)
	calls := c.fake.Calls()
	go func() { done <- p.Delete(ctx, inst.ProviderID) }()
	// Place the server once Delete has read it at least twice, or at once
	// if Delete already returned.
	select {
	case err := <-done:
		done <- err
	case <-waitFor(func() bool { return c.fake.Calls() >= calls+2 }):
	}
	if err := c.fake.PlaceServer(id); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Delete = %v", err)
	}
	got, err := p.Get(ctx, inst.ProviderID)
	if err == nil && got.State != contract.StateTerminated {
		t.Fatalf("Get after Delete = %s, want Terminated or ErrNotFound: Delete returned before Nova placed the server", got.State)
	}
	if err != nil && !errors.Is(err, contract.ErrNotFound) {
		t.Fatalf("Get after Delete = %v", err)
	}

	// Never placed within callTimeout: transient, and nothing deleted.
	short := c.provider(t)
	// Logged in at the suite's timeout first: a login is slower than a
	// read, and on a loaded machine outlasts 50 ms (seen failing there
	// with "log in to …: context deadline exceeded").
	if _, err := short.ListByTag(ctx, contract.LabelUID, inst.UID); err != nil {
		t.Fatal(err)
	}
	short.cfg.CallTimeout.Duration = 50 * time.Millisecond
	stuck, err := short.Create(ctx, request("proxy-stuck"))
	if err != nil {
		t.Fatal(err)
	}
	err = short.Delete(ctx, stuck.ProviderID)
	if err == nil || contract.ClassOf(err) != contract.ClassTransient || !strings.Contains(err.Error(), "still being scheduled") {
		t.Fatalf("Delete of a server never placed = %v, want a transient error saying it is being scheduled", err)
	}
	if got, err := short.Get(ctx, stuck.ProviderID); err != nil || got.State != contract.StateProvisioning {
		t.Errorf("after the refused Delete, Get = %+v, %v; want the server still Provisioning", got, err)
	}
}

// TestRescheduledBuildAfterItsDeleteIsTerminated: Delete deletes a
// building server's port before the server, and a build whose port goes
// under it fails in spawn and is rescheduled; the reschedule sets
// task_state back to "scheduling" over the delete's "deleting" (osfake's
// RescheduleBuild cites Nova), and the server reads BUILD (scheduling)
// until its terminate runs. Get must not report it Provisioning, from this
// provider or a restarted one (contract §4.9), and a second Delete must
// not wait for a scheduler that will never place it. The old Get read it
// Provisioning, and the old Delete waited for it as for a new server.
func TestRescheduledBuildAfterItsDeleteIsTerminated(t *testing.T) {
	c := startCloud(t, func(o *osfake.Options) { o.HoldBuilds, o.DeleteDelay = true, time.Hour })
	p := c.provider(t)
	ctx := context.Background()
	inst, err := p.Create(ctx, request("proxy-rescheduled"))
	if err != nil {
		t.Fatal(err)
	}
	_, id, _ := ids.Parse(inst.ProviderID)
	if err := p.Delete(ctx, inst.ProviderID); err != nil {
		t.Fatalf("Delete = %v", err)
	}
	if err := c.fake.RescheduleBuild(id, true); err != nil {
		t.Fatal(err)
	}
	for name, q := range map[string]*Provider{"the provider that deleted it": p, "a restarted provider": c.provider(t)} {
		got, err := q.Get(ctx, inst.ProviderID)
		if err != nil || got.State != contract.StateTerminated {
			t.Errorf("Get from %s of a server its delete's reschedule shows BUILD (scheduling) = %s (%q), %v; want Terminated", name, got.State, got.Message, err)
		}
	}
	short := c.provider(t)
	short.cfg.CallTimeout.Duration = time.Second
	if err := short.Delete(ctx, inst.ProviderID); err != nil {
		t.Fatalf("Delete again = %v, want nil: the server is going, no scheduler will place it", err)
	}
	if _, err := p.Get(ctx, inst.ProviderID); !errors.Is(err, contract.ErrNotFound) {
		t.Errorf("Get after the second Delete = %v, want ErrNotFound (Nova destroys an instance with no host at once)", err)
	}

	// On a cloud of one compute host the conductor gives up on the
	// reschedule at once: ERROR, with a fault, and task_state null, before
	// the terminate runs (the lane's own sequence). Still going: not a
	// failed build to report.
	exhausted, err := p.Create(ctx, request("proxy-rescheduled-exhausted"))
	if err != nil {
		t.Fatal(err)
	}
	_, exhaustedID, _ := ids.Parse(exhausted.ProviderID)
	if err := p.Delete(ctx, exhausted.ProviderID); err != nil {
		t.Fatalf("Delete = %v", err)
	}
	if err := c.fake.RescheduleBuild(exhaustedID, false); err != nil {
		t.Fatal(err)
	}
	for name, q := range map[string]*Provider{"the provider that deleted it": p, "a restarted provider": c.provider(t)} {
		got, err := q.Get(ctx, exhausted.ProviderID)
		if err != nil && !errors.Is(err, contract.ErrNotFound) || err == nil && got.State != contract.StateTerminated {
			t.Errorf("Get from %s of a server its delete's reschedule left in ERROR = %s (%q), %v; want Terminated or ErrNotFound", name, got.State, got.Message, err)
		}
	}

	// A rescheduled build no one deleted is a build.
	other, err := p.Create(ctx, request("proxy-rescheduled-alone"))
	if err != nil {
		t.Fatal(err)
	}
	_, otherID, _ := ids.Parse(other.ProviderID)
	if _, err := p.Get(ctx, other.ProviderID); err != nil {
		t.Fatal(err)
	}
	if err := c.fake.RescheduleBuild(otherID, true); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Get(ctx, other.ProviderID); err != nil || got.State != contract.StateProvisioning {
		t.Errorf("Get of a rescheduled build no one deleted = %s, %v; want Provisioning", got.State, err)
	}
}

// TestBuildCutShortByItsDeleteIsTerminated: a delete that lands while
// the compute host builds the server can be written over by the build's
// block-device save, which names no expected task state, and the server
// reads BUILD (spawning) with its delete recorded (osfake's
// BuildOverDelete cites Nova); or, later, it fails the build's last save,
// and the
// build's network clean-up then saves what the build had set: ACTIVE,
// task_state null, no address (osfake's finishBuild cites Nova), until the
// terminate queued behind the build's lock destroys it. The lane's harness
// met it (DeleteResumesAfterFailure: "Get after Delete returned state
// Provisioning (ACTIVE without a routable IPv4 address yet)"). Get must
// report it Terminated, from this provider or a restarted one (contract
// §4.9). The old Get read it Provisioning (and the old osfake, which let
// the build finish as if no delete had come, Running).
func TestBuildCutShortByItsDeleteIsTerminated(t *testing.T) {
	c := startCloud(t, func(o *osfake.Options) { o.HoldBuilds, o.DeleteDelay = true, time.Hour })
	p := c.provider(t)
	ctx := context.Background()
	ends := map[string]func(id string) error{
		// The build's last save fails; its clean-up saves ACTIVE, no task.
		"cut short at its end": c.fake.FinishBuild,
		// The build's block-device save writes over "deleting" and it
		// goes on spawning (the lane's TestRealCloudFloatingIPSet met it).
		"written over": c.fake.BuildOverDelete,
		// Written over, and the build then ends as if no delete had come:
		// ACTIVE, no task, with its address (the lane's harness met it:
		// DeleteResumesAfterFailure, "Get after Delete returned state
		// Running").
		"written over then built": func(id string) error {
			if err := c.fake.BuildOverDelete(id); err != nil {
				return err
			}
			return c.fake.FinishBuild(id)
		},
	}
	for end, play := range ends {
		for _, static := range []bool{false, true} {
			req := request(fmt.Sprintf("proxy-%s-%t", strings.ReplaceAll(end, " ", "-"), static))
			if static {
				req = staticRequest(req.Name, "10.0.0.201/24")
			}
			inst, err := p.Create(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			_, id, _ := ids.Parse(inst.ProviderID)
			if err := p.Delete(ctx, inst.ProviderID); err != nil {
				t.Fatalf("Delete = %v", err)
			}
			if err := play(id); err != nil {
				t.Fatal(err)
			}
			for name, q := range map[string]*Provider{"the provider that deleted it": p, "a restarted provider": c.provider(t)} {
				got, err := q.Get(ctx, inst.ProviderID)
				if err != nil || got.State != contract.StateTerminated {
					t.Errorf("static %t: Get from %s of a build %s by its delete = %s (%q), %v; want Terminated", static, name, end, got.State, got.Message, err)
				}
			}
		}
	}
}

// waitFor closes the channel it returns once cond holds.
func waitFor(cond func() bool) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for !cond() {
			time.Sleep(time.Millisecond)
		}
		close(ch)
	}()
	return ch
}

// On a cloud with soft delete (reclaim_instance_interval > 0) a DELETE of
// a server that has run soft-deletes it, and a repeated DELETE only
// soft-deletes it again (nova/api/openstack/compute/servers.py _delete):
// the server, its quota and its marks would stay until Nova reclaims it,
// hours later, and the Proxy's finalizer with them. Delete forces the
// delete (forceDelete, which Nova's default policy lets a project member
// do: nova/policies/deferred_delete.py), of a running server and of one
// already soft-deleted alike.
func TestDeleteForcesPastSoftDelete(t *testing.T) {
	c := startCloud(t, func(o *osfake.Options) { o.ReclaimInstanceInterval = time.Hour })
	p := c.provider(t)
	ctx := context.Background()
	for _, soft := range []bool{false, true} {
		inst, err := p.Create(ctx, request(fmt.Sprintf("proxy-reclaim-%v", soft)))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := p.Get(ctx, inst.ProviderID); err != nil || got.State != contract.StateRunning {
			t.Fatalf("Get before the delete = %+v, %v; want Running", got, err)
		}
		if soft { // soft-deleted before this Delete (by an older operator, by hand)
			_, id, _ := ids.Parse(inst.ProviderID)
			if err := c.fake.SetStatus(id, "SOFT_DELETED", "soft-delete", ""); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Delete(ctx, inst.ProviderID); err != nil {
			t.Fatal(err)
		}
		if got, err := p.Get(ctx, inst.ProviderID); !errors.Is(err, contract.ErrNotFound) {
			t.Errorf("Get after Delete of a server soft-deleted before: %v = %+v, %v; want ErrNotFound", soft, got, err)
		}
	}
}

// A POST /servers whose answer never came (the client gave up at its
// createTimeout, the API still working on it) is in doubt: Nova may list
// the server a moment later. A Create of the same request that lists
// nothing meanwhile must not submit again blindly, or both POSTs make a
// server; it waits (a transient error naming the create in doubt) until
// the server is listed or twice createTimeout has passed.
func TestCreateDoesNotRepeatAPostInDoubt(t *testing.T) {
	c := startCloud(t)
	c.cfg.CreateTimeout = contract.Duration{Duration: 300 * time.Millisecond}
	p := c.provider(t)
	ctx := context.Background()
	release := make(chan struct{})
	var held sync.Once
	c.fake.SetGate(func(r *http.Request) error {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/servers") {
			held.Do(func() { <-release }) // the API takes its time with the first create
		}
		return nil
	})
	req := request("proxy-in-doubt")
	if _, err := p.Create(ctx, req); err == nil {
		t.Fatal("Create whose POST outlasted createTimeout succeeded")
	}
	_, err := p.Create(ctx, req)
	if err == nil || contract.ClassOf(err) != contract.ClassTransient || !strings.Contains(err.Error(), "in doubt") {
		t.Errorf("Create while the first POST is in doubt = %v; want a transient error naming the create in doubt", err)
	}
	close(release) // the API accepts the first create
	var inst contract.Instance
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if inst, err = p.Create(ctx, req); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("Create once the first POST landed: %v", err)
	}
	if n := len(named(c, req.Name)); n != 1 {
		t.Errorf("%d servers named %s after a POST in doubt, want 1 (%+v)", n, req.Name, inst)
	}
}

// A create in doubt that Nova never lists is submitted again once twice
// createTimeout has passed.
func TestCreateInDoubtIsSubmittedAgainLater(t *testing.T) {
	c := startCloud(t)
	c.cfg.CreateTimeout = contract.Duration{Duration: 200 * time.Millisecond}
	p := c.provider(t)
	ctx := context.Background()
	var lost sync.Once
	c.fake.SetGate(func(r *http.Request) error {
		var err error
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/servers") {
			lost.Do(func() { err = errors.New("the API never received the first create") })
		}
		return err
	})
	req := request("proxy-in-doubt-lost")
	start := time.Now()
	if _, err := p.Create(ctx, req); err == nil {
		t.Fatal("Create whose POST was lost succeeded")
	}
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err = p.Create(ctx, req); err == nil || time.Now().After(deadline) {
			break
		}
		if !strings.Contains(err.Error(), "in doubt") {
			t.Fatalf("Create after a lost POST: %v; want the create in doubt, then a server", err)
		}
	}
	if err != nil {
		t.Fatalf("Create long after a lost POST: %v", err)
	}
	if waited := time.Since(start); waited < 2*c.cfg.CreateTimeout.Duration {
		t.Errorf("submitted again after %s; want twice createTimeout (%s) first", waited, 2*c.cfg.CreateTimeout.Duration)
	}
	if n := len(named(c, req.Name)); n != 1 {
		t.Errorf("%d servers named %s, want 1", n, req.Name)
	}
}

// The Checker runs every health round (a minute): it checks the
// credential on the provider's session, validating its token with
// Keystone (GET /v3/auth/tokens), instead of logging in each round. A
// credential revoked since (its tokens revoked with it) or a clouds file
// changed still shows in the next round.
func TestCheckerReusesTheSession(t *testing.T) {
	c := startCloud(t)
	var logins atomic.Int32
	c.fake.SetGate(func(r *http.Request) error {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/auth/tokens") {
			logins.Add(1)
		}
		return nil
	})
	p := c.provider(t)
	ctx := context.Background()
	credential := func() string {
		for _, r := range p.Check(ctx) {
			if r.Target == "credentials" {
				return r.Reason
			}
		}
		return "no credentials result"
	}
	for round := range 3 {
		if got := credential(); got != contract.ReasonOK {
			t.Fatalf("round %d: credentials %q", round, got)
		}
	}
	if n := logins.Load(); n != 1 {
		t.Errorf("three Check rounds logged in %d times, want once", n)
	}
	c.fake.RejectCredentials(true)
	if got := credential(); got == contract.ReasonOK {
		t.Errorf("credentials after Keystone revoked the tokens and refuses the credential: %q", got)
	}
	c.fake.RejectCredentials(false)
	if got := credential(); got != contract.ReasonOK {
		t.Errorf("credentials once Keystone accepts it again: %q", got)
	}
}
