package osfake_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/instanceactions"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"github.com/egress-proxies/egress-proxies-operator/providers/openstack/osfake"
)

// A server's actions are its create and, once the API casts it, its
// delete, newest first; a build rescheduled during its delete reads BUILD
// (scheduling) until the delete ends, and a DELETE of it destroys it at
// once (actions.go cites Nova for each).
func TestActionsAndARescheduledDelete(t *testing.T) {
	c, compute := start(t, func(o *osfake.Options) { o.HoldBuilds, o.DeleteDelay = true, time.Hour })
	ctx := context.Background()
	id := create(t, c, compute, "rescheduled")
	if got := actionNames(t, compute, id); len(got) != 1 || got[0] != "create" {
		t.Errorf("actions of a new server = %v, want [create]", got)
	}
	if err := servers.Delete(ctx, compute, id).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if got := actionNames(t, compute, id); len(got) != 2 || got[0] != "delete" || got[1] != "create" {
		t.Errorf("actions after the delete = %v, want [delete create] (newest first)", got)
	}
	if err := c.RescheduleBuild(id, true); err != nil {
		t.Fatal(err)
	}
	for range 2 { // and still after a later request has moved time on
		if s := get(t, compute, id); s.Status != "BUILD" || s.TaskState != "scheduling" {
			t.Errorf("a build rescheduled during its delete reads %s (%s), want BUILD (scheduling)", s.Status, s.TaskState)
		}
	}
	if err := servers.Delete(ctx, compute, id).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := servers.Get(ctx, compute, id).Extract(); !gophercloud.ResponseCodeIs(err, 404) {
		t.Errorf("get after a DELETE of the rescheduled server = %v, want 404", err)
	}

	// No host left for the reschedule: ERROR with the conductor's fault,
	// no task; a forceDelete destroys it at once.
	exhausted := create(t, c, compute, "exhausted")
	if err := servers.Delete(ctx, compute, exhausted).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if err := c.RescheduleBuild(exhausted, false); err != nil {
		t.Fatal(err)
	}
	s := get(t, compute, exhausted)
	if s.Status != "ERROR" || s.TaskState != "" || !strings.HasPrefix(s.Fault.Message, "Exceeded maximum number of retries.") {
		t.Errorf("a build rescheduled with no host left reads %s (%q), fault %q; want ERROR, no task, MaxRetriesExceeded", s.Status, s.TaskState, s.Fault.Message)
	}
	if err := servers.ForceDelete(ctx, compute, exhausted).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := servers.Get(ctx, compute, exhausted).Extract(); !gophercloud.ResponseCodeIs(err, 404) {
		t.Errorf("get after a forceDelete of the server left in ERROR = %v, want 404", err)
	}
}

func actionNames(t *testing.T, compute *gophercloud.ServiceClient, id string) []string {
	t.Helper()
	pages, err := instanceactions.List(compute, id, nil).AllPages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	actions, err := instanceactions.ExtractInstanceActions(pages)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range actions {
		if a.InstanceUUID != id || a.RequestID == "" || a.StartTime.IsZero() {
			t.Errorf("action %+v: want the server's UUID, a request ID and a start time", a)
		}
		names = append(names, a.Action)
	}
	return names
}

// A build a delete came during ends as Nova's compute ends it: ACTIVE, no
// task, no address, with the delete recorded, until the terminate destroys
// it (nova.go cutShort cites Nova).
func TestBuildCutShortByItsDelete(t *testing.T) {
	c, compute := start(t, func(o *osfake.Options) { o.HoldBuilds, o.DeleteDelay = true, 300*time.Millisecond })
	ctx := context.Background()
	id := create(t, c, compute, "cut-short")
	if err := servers.Delete(ctx, compute, id).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if err := c.FinishBuild(id); err != nil {
		t.Fatal(err)
	}
	s := get(t, compute, id)
	if s.Status != "ACTIVE" || s.TaskState != "" || len(s.Addresses) != 0 || s.LaunchedAt.IsZero() {
		t.Errorf("a build cut short by its delete reads %s (%q), addresses %v, launched %v; want ACTIVE, no task, no address, launched", s.Status, s.TaskState, s.Addresses, s.LaunchedAt)
	}
	if got := actionNames(t, compute, id); len(got) != 2 || got[0] != "delete" {
		t.Errorf("actions = %v, want [delete create]", got)
	}
	time.Sleep(400 * time.Millisecond)
	if _, err := servers.Get(ctx, compute, id).Extract(); !gophercloud.ResponseCodeIs(err, 404) {
		t.Errorf("get once the terminate ran = %v, want 404", err)
	}
}

// A build whose block-device save came after its delete reads BUILD
// (spawning) with the delete recorded (actions.go BuildOverDelete cites
// Nova).
func TestBuildOverItsDelete(t *testing.T) {
	c, compute := start(t, func(o *osfake.Options) { o.HoldBuilds, o.DeleteDelay = true, time.Hour })
	ctx := context.Background()
	id := create(t, c, compute, "over-delete")
	if err := servers.Delete(ctx, compute, id).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if err := c.BuildOverDelete(id); err != nil {
		t.Fatal(err)
	}
	if s := get(t, compute, id); s.Status != "BUILD" || s.TaskState != "spawning" {
		t.Errorf("a build written over its delete reads %s (%q), want BUILD (spawning)", s.Status, s.TaskState)
	}
	if got := actionNames(t, compute, id); len(got) != 2 || got[0] != "delete" {
		t.Errorf("actions = %v, want [delete create]", got)
	}
}
