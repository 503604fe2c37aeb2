package vsphere

import (
	"context"

	"github.com/vmware/govmomi/object"
)

// waitTask waits for a task of a Delete (the deleting mark's reconfigure,
// the power-off, the destroy) as govmomi's Task.Wait does: a property
// collector of its own, told of the task's end as it happens. Reads of
// the task's info before it (at 50, 200 and 500 ms, until 2026-12) cost
// fewer calls only where a task ends within a few hundred milliseconds,
// as on vcsim; with every task taking 0.5 to 4 s longer they cost 31 calls
// a Delete against 22, and with tasks of 250 to 500 ms they made a Delete
// up to half a second later (hack/bench-vsphere-tasks.sh,
// docs/performance.md, "vSphere task waits"). The benchmark swaps it for
// the ways it compares.
var waitTask = func(ctx context.Context, t *object.Task) error { return t.Wait(ctx) }
