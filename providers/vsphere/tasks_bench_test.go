package vsphere

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// taskDurations are the task times BenchmarkDeleteTaskWaits plays on
// every task of a Delete (the deleting mark's reconfigure, the power-off,
// the destroy): vcsim's own (microseconds) up to 4 s. vSphere publishes no
// task time to hold them to, and a vCenter's depend on its load and its
// storage, so the choice of the wait must hold across the range
// (docs/performance.md, "vSphere task waits").
var taskDurations = []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second}

// taskWaits are the ways to wait for a task the benchmark compares:
// govmomi's Task.Wait alone (waitTask, the provider's), and reads of the
// task's info before it, as the provider made them until 2026-12 (three,
// by 750 ms) and with one read.
var taskWaits = []struct {
	name string
	wait func(context.Context, *object.Task) error
}{
	{"task-wait", waitTask},
	{"three-reads", readsFirst(50*time.Millisecond, 200*time.Millisecond, 500*time.Millisecond)},
	{"one-read-100ms", readsFirst(100 * time.Millisecond)},
	{"one-read-250ms", readsFirst(250 * time.Millisecond)},
}

// readsFirst waits for a task by reading its info (one RetrievePropertiesEx)
// after each of polls, and only a task still running after them with
// Task.Wait (the provider's waitShortTask until 2026-12).
func readsFirst(polls ...time.Duration) func(context.Context, *object.Task) error {
	return func(ctx context.Context, t *object.Task) error {
		pc := property.DefaultCollector(t.Client())
		for _, d := range polls {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
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
}

// BenchmarkDeleteTaskWaits deletes a running VM on vcsim with every task
// taking each of taskDurations more (simulator.TaskDelay), its call
// answered at once as vCenter answers (vcsim.tasksRunOn), waiting for the
// tasks each way of taskWaits. It reports the SOAP calls of the Delete
// (calls/op) beside its time (ns/op; one way against the other at the
// same task time is what the wait adds to a replacement's or a
// failover's Delete). Figures, not assertions:
// hack/bench-vsphere-tasks.sh prints them as a table; the calls of each
// step at vcsim's speed are pinned by TestCallsPerStep.
func BenchmarkDeleteTaskWaits(b *testing.B) {
	v := startVcsim(b)
	// The default budgets, not the tests' short ones: a 4 s task outlasts
	// them.
	v.cfg.CallTimeout = contract.Duration{Duration: 30 * time.Second}
	v.cfg.TaskTimeout = contract.Duration{Duration: 5 * time.Minute}
	p := v.provider(b)
	saved := waitTask
	b.Cleanup(func() { waitTask, simulator.TaskDelay = saved, simulator.DelayConfig{} })
	v.tasksRunOn.Store(true)
	n := 0
	for _, d := range taskDurations {
		for _, w := range taskWaits {
			b.Run(fmt.Sprintf("task=%s/%s", d, w.name), func(b *testing.B) {
				waitTask = w.wait
				var calls int
				for b.Loop() {
					b.StopTimer()
					n++
					inst := createVM(b, p, fmt.Sprintf("tasks-%d", n), fmt.Sprintf("uid-tasks-%d", n), testOwner)
					// Every task takes d, without holding its VM's lock
					// meanwhile, so its info can be read as on a vCenter.
					simulator.TaskDelay = simulator.DelayConfig{Delay: int(d / time.Millisecond), MethodDelay: map[string]int{"LockHandoff": 0}}
					var l methodLog
					stop := l.watch(v)
					b.StartTimer()
					err := p.Delete(context.Background(), inst.ProviderID)
					b.StopTimer()
					stop()
					simulator.TaskDelay = simulator.DelayConfig{}
					if err != nil {
						b.Fatalf("Delete: %v", err)
					}
					calls += len(l.methods)
					b.StartTimer()
				}
				b.ReportMetric(float64(calls)/float64(b.N), "calls/op")
			})
		}
	}
}
