package osfake

import (
	"net/http"
	"slices"
	"time"
)

// action is one of a server's instance actions, the record Nova keeps of
// each operation on it (GET /servers/{id}/os-instance-actions, Compute API
// reference "List Actions For Server").
type action struct {
	name      string
	requestID string
	start     time.Time
}

// The actions the fake records, as Nova does:
//   - "create", when the conductor writes the instance to its cell
//     (nova/conductor/manager.py schedule_and_build_instances,
//     InstanceAction.action_start with instance_actions.CREATE);
//   - "delete", when the API casts terminate_instance to the compute host
//     (nova/compute/api.py _delete, _record_action_start with
//     instance_actions.DELETE), for delete, soft delete and forceDelete
//     alike. A delete that only removes a build request (_delete_while_booting)
//     records nothing: the instance is in no cell yet.
const (
	actionCreate = "create"
	actionDelete = "delete"
)

func (s *server) record(name string, now time.Time) {
	s.actions = append(s.actions, action{name: name, requestID: "req-" + newUUID(), start: now.UTC()})
}

// instanceActions lists a server's actions newest first, as Nova's
// actions_get orders them (nova/db/main/api.py: created_at desc, id desc);
// the fields are those of microversion 2.1 to 2.57.
func (c *Cloud) instanceActions(w http.ResponseWriter, r *http.Request, _ microversion, region string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.lookup(w, r, region)
	if s == nil {
		return
	}
	list := make([]map[string]any, 0, len(s.actions))
	for _, a := range slices.Backward(s.actions) {
		list = append(list, map[string]any{
			"action": a.name, "instance_uuid": s.id, "message": nil, "project_id": c.projectID,
			"request_id": a.requestID, "start_time": a.start.Format("2006-01-02T15:04:05.000000"), "user_id": c.userID,
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"instanceActions": list})
}

// RescheduleBuild plays a build that failed on its compute host and is
// rescheduled (nova/compute/manager.py _do_build_and_run_instance, on
// RescheduledException): the host is cleared and task_state set back to
// "scheduling" by a save that names no expected task state, so it
// overwrites a delete's "deleting" as well. A build fails so when its port
// is deleted under it: the FakeDriver's spawn reads the network info, and
// the allocation's PortNotFound is re-raised there (nova/virt/fake.py
// spawn; _build_and_run_instance turns it into RescheduledException; the
// lane's compute log shows exactly that). With hostsLeft the server reads
// BUILD (scheduling) while the conductor places it again; without, the
// conductor gives up at once, as on a cloud of one compute host: ERROR,
// task_state null, with the fault "Exceeded maximum number of retries.
// Exhausted all hosts available for retrying build failures for instance
// <id>." (nova/conductor/manager.py build_instances, MaxRetriesExceeded;
// nova/scheduler/utils.py set_vm_state_and_notify). A delete that was
// under way still ends (DeleteDelay): its terminate_instance waits on the
// build's instance lock and destroys the instance when it gets it. The
// server never finishes the build in the fake.
func (c *Cloud) RescheduleBuild(id string, hostsLeft bool) error {
	return c.withServer(id, func(s *server) {
		now := time.Now().UTC()
		s.rescheduled, s.updated = true, now
		if hostsLeft {
			s.status, s.vmState, s.taskState = statusBuild, "building", "scheduling"
			return
		}
		s.status, s.vmState, s.taskState, s.faultAt = statusError, "error", "", now
		s.fail = "Exceeded maximum number of retries. Exhausted all hosts available for retrying build failures for instance " + s.id + "."
	})
}

// BuildOverDelete plays a delete that lands while the compute host builds
// the server, before the build's block-device step: that step saves
// task_state block_device_mapping with no expected task state, over the
// delete's "deleting", and the build goes on to spawning, whose save
// expects block_device_mapping and succeeds (nova/compute/manager.py
// _build_resources, _build_and_run_instance). The server reads BUILD
// (spawning) with its delete recorded; the build's last save expects
// spawning and finds it, so a build that ends (FinishBuild) reads ACTIVE,
// no task, with its address and launched_at, as if no delete had come,
// until the terminate, queued behind the build's instance lock, destroys
// it (DeleteDelay). The lane met both: a forceDelete answered 202, then
// two reads of BUILD (spawning), then 404; and in another run BUILD
// (spawning), then ACTIVE with no task, then 404 within two seconds.
func (c *Cloud) BuildOverDelete(id string) error {
	return c.withServer(id, func(s *server) {
		if s.status == statusBuild && s.deleting {
			s.taskState, s.updated, s.deleteWrittenOver = "spawning", time.Now().UTC(), true
		}
	})
}
