package operation

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// laneProxy is the object whose lane a test uses: a Proxy, known by its
// key, UID and resourceVersion.
func laneProxy(uid string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-" + uid, UID: types.UID(uid), ResourceVersion: "7"}}
}

// wakeOf waits for the operations' next wake and returns the Proxy it names.
func wakeOf(t *testing.T, o *Runner) string {
	t.Helper()
	select {
	case e := <-o.wake:
		return e.Object.GetNamespace() + "/" + e.Object.GetName()
	case <-time.After(20 * time.Second):
		t.Fatal("no wake")
		return ""
	}
}

// One operation per Proxy at a time; its end wakes the Proxy; its result
// is taken once, by the same call; the next ask starts it again.
func TestOperationResultIsTakenOnceByItsCall(t *testing.T) {
	o := New()
	p := laneProxy("a")
	get := Call{MethodGet, "r1/x"}
	gate := make(chan struct{})
	var calls atomic.Int32
	fn := func(context.Context) (string, error) {
		calls.Add(1)
		<-gate
		return "running", errors.New("probe refused")
	}

	if _, done, _ := Await(context.Background(), o, p, "mem", get, fn); done {
		t.Fatal("done before the call ran")
	}
	if _, done, _ := Await(context.Background(), o, p, "mem", Call{MethodCreate, "x"}, fn); done || !o.Running(p.UID) {
		t.Fatal("another call asked while one runs: want not done, still running")
	}
	close(gate)
	if got := wakeOf(t, o); got != "ns/p-a" {
		t.Fatalf("woke %s, want ns/p-a", got)
	}
	if rv, ended := o.StartedAt(p.UID); !ended || rv != "7" {
		t.Errorf("startedAt %q %v, want the resourceVersion the call started from", rv, ended)
	}
	v, done, err := Await(context.Background(), o, p, "mem", get, fn)
	if !done || v != "running" || err == nil || err.Error() != "probe refused" {
		t.Fatalf("result %q done %v err %v", v, done, err)
	}
	if _, done, _ := Await(context.Background(), o, p, "mem", get, fn); done {
		t.Fatal("a result was taken twice")
	}
	wakeOf(t, o)
	if n := calls.Load(); n != 2 {
		t.Errorf("%d calls, want the first and the one started after its result was taken", n)
	}
}

// A reconcile asking for another call drops the result waiting in the
// lane, and starts its own; a Create's result is pinned meanwhile
// (creating) and can be kept after a failed status write.
func TestOtherCallDropsTheResultAndKeepRestoresIt(t *testing.T) {
	o := New()
	p := laneProxy("b")
	create := Call{MethodCreate, "vm-1"}
	ok := func(context.Context) (string, error) { return "made", nil }
	if _, done, _ := Await(context.Background(), o, p, "mem", create, ok); done {
		t.Fatal("done before the call ran")
	}
	wakeOf(t, o)
	if name := o.Creating(p.UID); name != "vm-1" {
		t.Fatalf("creating %q, want vm-1 while its result waits", name)
	}
	v, done, _ := Await(context.Background(), o, p, "mem", create, ok)
	if !done || v != "made" {
		t.Fatalf("Create result %q %v", v, done)
	}
	o.Keep(p, p.UID, create, v, nil)
	if name := o.Creating(p.UID); name != "vm-1" {
		t.Fatalf("creating %q after keep, want vm-1", name)
	}
	if _, done, _ := Await(context.Background(), o, p, "mem", Call{MethodFinalize, "b"}, ok); done {
		t.Fatal("the Finalize took the Create's result")
	}
	wakeOf(t, o)
	if o.Creating(p.UID) != "" {
		t.Error("the Create's result survived another call")
	}
	if _, done, _ := Await(context.Background(), o, p, "mem", create, ok); done {
		t.Error("the dropped Create result was taken")
	}
}

// Stopping the manager cancels the operations in flight and waits for
// them; a retire of an instance already being retired is not started twice.
func TestStopCancelsOperationsAndWaits(t *testing.T) {
	o := New()
	started, returned := make(chan struct{}), atomic.Bool{}
	_, _, _ = Await(context.Background(), o, laneProxy("c"), "mem", Call{MethodCreate, "vm"}, func(ctx context.Context) (string, error) {
		close(started)
		<-ctx.Done()
		returned.Store(true)
		return "", ctx.Err()
	})
	var retires atomic.Int32
	hold := make(chan struct{})
	for range 2 {
		o.Retire(context.Background(), "mem", "r1/old", func(context.Context) { retires.Add(1); <-hold })
	}
	<-started
	close(hold)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := o.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if !returned.Load() {
		t.Error("Start returned before the operation it cancelled")
	}
	if n := retires.Load(); n != 1 {
		t.Errorf("%d retires of one instance, want 1", n)
	}
}
