package openstack

import (
	"context"
	"fmt"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
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

// schedulingPoll is how often Delete reads a server Nova is scheduling.
var schedulingPoll = 500 * time.Millisecond

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
