package proxmox

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"time"

	"github.com/go-logr/logr"
	pve "github.com/luthermonson/go-proxmox"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// taskStatus is GET /nodes/{node}/tasks/{upid}/status.
type taskStatus struct {
	Status     string `json:"status"` // running, stopped
	ExitStatus string `json:"exitstatus"`
	Type       string `json:"type"`
}

// warningsRE is the exit status of a task whose worker warned: it
// succeeded (pve-common src/PVE/RESTEnvironment.pm fork_worker writes
// "TASK WARNINGS: <n>"; src/PVE/UPID.pm read_status returns the part after
// "TASK ").
var warningsRE = regexp.MustCompile(`^WARNINGS: \d+$`)

// taskSucceeded is pve-common's status_is_error negated (src/PVE/UPID.pm;
// PVE 8.4: src/PVE/Tools.pm upid_status_is_error): OK and WARNINGS: <n>
// are success, anything else ("unexpected status" too) is an error.
func taskSucceeded(exit string) bool { return exit == "OK" || warningsRE.MatchString(exit) }

// waitTask waits for a task (async-ops: task-handle) within the task
// timeout, polling its status. It does not use go-proxmox's Task.Wait:
// that returns nil for a task that failed, and sleeps between polls
// without watching ctx. A failed task is a *TaskError carrying the exit
// status, classified by its text. The UPID is escaped in the path, as a
// path segment must be (its user part holds '@' and '!'; an imgdel task's
// ID is the storage ID, "<owner>@<storage>" for a VM's volume: pve-storage
// API2/Storage/Content.pm delete).
func (p *Provider) waitTask(ctx context.Context, region string, upid pve.UPID, what string) error {
	if upid == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.TaskTimeout.Duration)
	defer cancel()
	interval := 50 * time.Millisecond
	for {
		var st taskStatus
		err := p.call(ctx, region, "TaskStatus", func(ctx context.Context, c conn) error {
			node := pve.NewTask(upid, c.api).Node
			return c.api.Get(ctx, "/nodes/"+url.PathEscape(node)+"/tasks/"+url.PathEscape(string(upid))+"/status", &st)
		})
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if st.Status == "stopped" {
			if !taskSucceeded(st.ExitStatus) {
				return fmt.Errorf("%s: %w", what, classify(&TaskError{Type: st.Type, UPID: string(upid), ExitStatus: st.ExitStatus}))
			}
			if st.ExitStatus != "OK" {
				logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("task succeeded with warnings", "task", what, "upid", upid, "exitStatus", st.ExitStatus)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s (%s): %w", what, upid, ctx.Err())
		case <-time.After(interval):
		}
		interval = min(interval*2, 2*time.Second)
	}
}
