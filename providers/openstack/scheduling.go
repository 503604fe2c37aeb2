package openstack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/instanceactions"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// A server Nova is still scheduling is not deleted yet. While its task_state
// is "scheduling" its build request may still stand, and Nova deletes such a
// server by deleting the build request and answering 204
// (nova/compute/api.py, _delete_while_booting). The conductor may already
// have written the instance to its cell: once it maps it there, the server
// reads BUILD again until the conductor finds the build request gone and
// destroys it (nova/conductor/manager.py, schedule_and_build_instances and
// _delete_build_request). A Delete that returned in between would be
// followed by a Get that finds the server Provisioning: the operator would
// release a Proxy whose server still shows (contract §4.9). Once the
// scheduler has placed the server (task_state moves on, or the server goes
// to ERROR in cell0), the build request is gone and Nova's delete is the
// ordinary one: task_state "deleting" at once, then 404.

//
// A server can read BUILD (scheduling) again after its delete, too: Delete
// deletes a building server's port first (ports.go), the build then fails
// in spawn and the compute host reschedules it, setting task_state back to
// "scheduling" by a save that names no expected task state, so over the
// delete's "deleting" (nova/compute/manager.py _do_build_and_run_instance,
// RescheduledException). The delete still ends: its terminate_instance
// waits on the build's instance lock and destroys the instance. Nova
// recorded that delete among the server's instance actions when it cast
// the terminate (nova/compute/api.py _delete, instance_actions.DELETE),
// so a scheduling server with a recorded delete is going, not building
// (deleteRecorded): Get reports it Terminated and Delete does not wait for
// a scheduler that will not place it. The same holds where the reschedule
// ends on a cloud with no other host, ERROR with no task
// (goingAfterDelete).
//
// A delete that lands while the compute host builds the server, before
// the build's block-device step, is written over by that step's save,
// which names no expected task state: task_state block_device_mapping,
// then spawning, whose save expects it (nova/compute/manager.py
// _build_resources, _build_and_run_instance). The lane read BUILD
// (spawning) right after a forceDelete's 202. So a building server in any
// task but deleting is read with its instance actions (mayBeGoing).
//
// And a delete that lands while the compute host spawns the server fails
// the build's last save, which expects task_state "spawning"; the build
// then releases its network and saves again with no expected task state,
// writing what it had set in memory over "deleting": ACTIVE, task_state
// null, no address (nova/compute/manager.py _build_and_run_instance,
// _update_instance_after_spawn; _do_build_and_run_instance,
// _cleanup_allocated_networks). The terminate, queued behind the build's
// instance lock, destroys it next. An ACTIVE server not yet Running
// (without its address) with a recorded delete is going too (mayBeGoing).
//
// A build whose block-device save wrote over the delete's "deleting" goes
// on: its last save expects spawning and finds it, so the server reads
// ACTIVE, no task, with its address and a fresh launched_at, as if no
// delete had come, until the terminate queued behind the build's lock
// destroys it. The lane read it so, BUILD (spawning) then ACTIVE then 404
// within two seconds. An ACTIVE server launched within justLaunched is
// read with its instance actions too: one call more per read of a server
// in its first minutes, none after.

// schedulingPoll is how often Delete reads a server Nova is scheduling.
var schedulingPoll = 500 * time.Millisecond

// justLaunched is how long after its launch an ACTIVE server may still be
// a build that ended over its delete. The terminate runs as soon as the
// build lets go of the instance's lock (seconds on the lane); two minutes
// leave room for a loaded cloud and for the operator's clock running
// ahead of Nova's.
const justLaunched = 2 * time.Minute

// mayBeGoing tells a read that may be what Nova leaves of a build its
// delete cut short, for as long as the delete's terminate waits on the
// build: BUILD in any task but deleting (a build step's save written over
// the delete's, a reschedule), ERROR with no task where the reschedule
// found no host, ACTIVE with no task and without its address after the
// build's clean-up, or with it and launched within justLaunched of now (a
// build that ended over its delete). Only a recorded delete tells it from
// a build (deleteRecorded): one call more per such read.
func mayBeGoing(s servers.Server, now time.Time) bool {
	switch {
	case s.Status == "BUILD":
		return s.TaskState != "deleting"
	case s.TaskState != "":
		return false
	case s.Status == "ERROR":
		return true
	case s.Status == "ACTIVE":
		state, _, _ := stateOf(s)
		return state == contract.StateProvisioning || now.Sub(s.LaunchedAt) < justLaunched
	}
	return false
}

// beingScheduled tells a server whose build request may still stand.
func beingScheduled(s servers.Server) bool {
	return s.Status == "BUILD" && s.TaskState == "scheduling"
}

// waitScheduled reads the server until Nova has placed it, for at most
// callTimeout; a server still being scheduled then is a transient error,
// and the operator's retry waits again. A server that went meanwhile is
// getServer's not-found error.
func (p *Provider) waitScheduled(ctx context.Context, regionKey string, s servers.Server) (servers.Server, error) {
	deadline := time.Now().Add(p.cfg.CallTimeout.Duration)
	for beingScheduled(s) {
		if going, err := p.deleteRecorded(ctx, regionKey, s.ID); going || err != nil {
			return s, err
		}
		if time.Now().After(deadline) {
			// Unclassified: transient.
			return s, fmt.Errorf("server %s is still being scheduled after %s; Nova would report it deleted before its conductor destroys it, so Delete waits for the scheduler",
				s.ID, p.cfg.CallTimeout.Duration)
		}
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("waiting for Nova to schedule server %s: %w", s.ID, ctx.Err())
		case <-time.After(schedulingPoll):
		}
		var err error
		if s, err = p.getServer(ctx, regionKey, s.ID); err != nil {
			return s, err
		}
	}
	return s, nil
}

// deleteRecorded tells whether Nova recorded a delete among the server's
// instance actions (GET /servers/{id}/os-instance-actions, which Nova's
// default policy lets a project reader list). A server gone meanwhile is
// getServer's not-found error. Any other failure to read them is logged
// and read as no delete: the server is then a build, as before the
// actions were read, and a cloud whose policy refuses the list loses only
// this distinction.
func (p *Provider) deleteRecorded(ctx context.Context, regionKey, id string) (bool, error) {
	var recorded bool
	err := p.do(ctx, "ListServerActions", regionKey, func(ctx context.Context, c *clients) error {
		pages, err := instanceactions.List(c.compute, id, nil).AllPages(ctx)
		if err != nil {
			return err
		}
		actions, err := instanceactions.ExtractInstanceActions(pages)
		recorded = slices.ContainsFunc(actions, func(a instanceactions.InstanceAction) bool { return a.Action == "delete" })
		return err
	})
	switch {
	case errors.Is(err, contract.ErrNotFound):
		return false, err
	case err != nil:
		logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("could not read the server's instance actions; reading it as a build", "server", id, "error", err.Error())
		return false, nil
	}
	return recorded, nil
}

// goingAfterDelete is the Instance of a server mayBeGoing, after Nova
// recorded its delete: Terminated. ERROR is where the reschedule ends on a
// cloud with no other host (nova/conductor/manager.py build_instances,
// MaxRetriesExceeded, task_state null), the lane's own sequence; the
// terminate Nova queued runs when the build's instance lock is free, and
// may have run before the ERROR was written, so a server with no task is
// deleted again (with no host Nova destroys it at once, "instance's host
// None is down, deleting from database"; ACTIVE after the build's
// clean-up, a second terminate finds it gone). Not a failed build to
// report: the operator asked for it to go.
func (p *Provider) goingAfterDelete(ctx context.Context, regionKey string, s servers.Server) contract.Instance {
	if s.TaskState == "" {
		if err := p.deleteServer(ctx, regionKey, s); err != nil && !errors.Is(err, contract.ErrNotFound) {
			logr.FromContextOrDiscard(ctx).Error(err, "could not delete again a server its delete's cut-short build left with no task; the next Get tries again", "server", s.ID, "status", s.Status)
		}
	}
	inst := instance(regionKey, s)
	inst.State, inst.IP = contract.StateTerminated, ""
	inst.Message = taskDetail(s) + " after its delete: the build the delete cut short wrote its state last, and the delete goes on"
	return inst
}
