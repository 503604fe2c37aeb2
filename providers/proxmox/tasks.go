package proxmox

import (
	"context"
	"fmt"
	"net/url"
	"time"

	pve "github.com/luthermonson/go-proxmox"
)

// taskStatus is GET /nodes/{node}/tasks/{upid}/status.
type taskStatus struct {
	Status     string `json:"status"` // running, stopped
	ExitStatus string `json:"exitstatus"`
	Type       string `json:"type"`
}

// waitTask waits for a task (async-ops: task-handle) within the task
// timeout, polling its status. It does not use go-proxmox's Task.Wait:
// that returns nil for a task that failed, and sleeps between polls
// without watching ctx. A failed task is a *TaskError carrying the exit
// status, classified by its text. The UPID is escaped in the path: an
// imgdel task's ID is a volume ID, which holds a '/', which go-proxmox's
// Task.Ping puts in the path as it is.
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
			if st.ExitStatus != "OK" {
				return fmt.Errorf("%s: %w", what, classify(&TaskError{Type: st.Type, UPID: string(upid), ExitStatus: st.ExitStatus}))
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
