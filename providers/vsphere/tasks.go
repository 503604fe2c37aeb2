package vsphere

import (
	"context"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// shortTaskPolls are the waits before each read of a short task's info:
// a reconfigure, a power-off or a destroy is usually done within them.
var shortTaskPolls = []time.Duration{50 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond}

// waitShortTask waits for a task that usually ends within a second. It
// reads the task's info (one RetrievePropertiesEx) after each of
// shortTaskPolls, and only a task still running after them is waited on
// as govmomi's Task.Wait does, with a property collector of its own, which
// costs four calls besides the wait (CreatePropertyCollector, CreateFilter,
// DestroyPropertyFilter, DestroyPropertyCollector): a delete's three tasks
// were 18 of its 20 calls (the fleet benchmark, docs/performance.md). A failed task's error is the
// task.Error Task.Wait returns, so classification reads it the same.
func waitShortTask(ctx context.Context, c *vim25.Client, t *object.Task) error {
	pc := property.DefaultCollector(c)
	for _, d := range shortTaskPolls {
		timer := time.NewTimer(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
		var mt mo.Task
		if err := pc.RetrieveOne(ctx, t.Reference(), []string{"info"}, &mt); err != nil {
			return err
		}
		switch mt.Info.State {
		case types.TaskInfoStateSuccess:
			return nil
		case types.TaskInfoStateError:
			return &task.Error{LocalizedMethodFault: mt.Info.Error, Description: mt.Info.Description}
		}
	}
	return t.Wait(ctx)
}
