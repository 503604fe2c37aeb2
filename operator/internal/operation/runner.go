// Package operation runs an object's provider calls in lanes of their own,
// beside the reconcile workers: one operation at a time per lane, its end
// reconciling the object at once, with a back-off after transient
// failures. It knows objects only by their key, UID and resourceVersion.
package operation

import (
	"context"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metrics"
)

// Runner runs the Proxies' provider calls in goroutines of their own,
// so that no reconcile waits for a backend. A full clone takes minutes, a
// booting VM may swallow connections, a backend may hang until its call
// timeout, and a provider entry's cap on calls in flight
// (limits.concurrency) makes callers queue: done on the reconcile workers,
// any of these stalled every Proxy on every provider. Here each waits in
// its own goroutine, and a slow backend slows only its own Proxies.
//
// Each Proxy has one lane: at most one operation at a time, so its steps
// keep their order (a Create ends before the Proxy's deletion lists its
// instances; a spec change waits until the VM being made is recorded). A
// reconcile asks for a call (await): the first time, the call starts and
// the reconcile returns; when it ends, the Proxy is reconciled at once
// (the wake channel, a source of the controller) and the reconcile that
// asks for the same call again takes its result. A result is taken once,
// and a lane holds nothing else: a reconcile that asks for another call
// drops it. Results live in memory only; a restarted operator simply
// calls again (Create is idempotent by contract, and the instance name is
// in the status before the Create starts).
//
// A lane whose operations fail transiently backs off: the next operation
// waits out an exponential delay before its call (backoff.go). The
// controller's own rate limiter cannot: the reconcile that starts the
// next operation succeeds, and its success resets the limiter's count.
//
// Instances being retired (a replaced VM, an abandoned replacement) are
// deleted beside the lanes, since nothing waits for them.
type Runner struct {
	// wake receives the Proxy whose operation ended.
	wake chan event.GenericEvent

	mu       sync.Mutex
	lanes    map[types.UID]*operation
	retiring map[string]bool // providerIDs
	// backoff is each lane's delay after transient failures in a row
	// (made on the first, from backoffBase and BackoffMax), and until when
	// its next operation waits.
	backoff *flowcontrol.Backoff
	until   map[types.UID]time.Time
	// backoffBase and BackoffMax bound a lane's delay after transient
	// failures.
	backoffBase, BackoffMax time.Duration
	// backoffsReset is closed (and replaced) when the back-offs are
	// forgotten, ending the waits of the operations backing off.
	backoffsReset chan struct{}

	// base ends every operation when the manager stops; operations are not
	// bounded otherwise: the provider bounds its own calls (contract §1.5).
	base context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// Call names one operation: what it does and to what.
type Call struct {
	Method, Arg string
}

type operation struct {
	call Call
	// rv is the Proxy's resourceVersion when the operation started: the
	// reconcile that takes the result reads the Proxy from the API server
	// when its cache holds another.
	rv       string
	finished time.Time // zero while the operation runs
	value    any
	err      error
}

// resultTTL is how long a finished result waits to be taken. The wake
// brings its reconcile within moments; a result older than this was left
// behind by a reconcile that went another way, and is stale.
const resultTTL = time.Minute

// New returns a Runner; the manager starts it (Start) and stops every
// operation with itself.
func New() *Runner {
	base, stop := context.WithCancel(context.Background())
	return &Runner{
		// Sends happen off the workers; the buffer only spares them a wait
		// for the controller's source to read.
		wake:          make(chan event.GenericEvent, 256),
		lanes:         map[types.UID]*operation{},
		retiring:      map[string]bool{},
		until:         map[types.UID]time.Time{},
		backoffBase:   defaultBackoffBase,
		BackoffMax:    defaultBackoffMax,
		backoffsReset: make(chan struct{}),
		base:          base,
		stop:          stop,
	}
}

// Start runs until the manager stops, then cancels every operation and
// waits for them: a provider returns within a second of its ctx ending
// (contract §1.5).
func (o *Runner) Start(ctx context.Context) error {
	<-ctx.Done()
	o.stop()
	o.wg.Wait()
	return nil
}

// NeedLeaderElection is false: operations start only on the leader, whose
// reconciles start them, but every replica must end them at shutdown.
func (o *Runner) NeedLeaderElection() bool { return false }

// Await returns the result of c for the Proxy once its operation has ended
// (done), and starts fn for it when the Proxy's lane is free. While done is
// false the caller returns; the operation's end reconciles the Proxy.
func Await[T any](ctx context.Context, o *Runner, obj client.Object, provider string, c Call, fn func(context.Context) (T, error)) (value T, done bool, err error) {
	return AwaitIn(ctx, o, obj, obj.GetUID(), provider, c, fn)
}

// AwaitIn is Await in the lane named lane: a replica's (see replica.Lane()).
func AwaitIn[T any](ctx context.Context, o *Runner, obj client.Object, lane types.UID, provider string, c Call, fn func(context.Context) (T, error)) (value T, done bool, err error) {
	if op := o.take(lane, c); op != nil {
		value, _ = op.value.(T)
		return value, true, op.err
	}
	o.start(ctx, obj, lane, provider, c, func(ctx context.Context) (any, error) { return fn(ctx) })
	return value, false, nil
}

// take removes the Proxy's finished operation and returns it when it is c
// and fresh; nil otherwise.
func (o *Runner) take(uid types.UID, c Call) *operation {
	o.mu.Lock()
	defer o.mu.Unlock()
	op := o.lanes[uid]
	if op == nil || op.finished.IsZero() {
		return nil
	}
	delete(o.lanes, uid)
	if op.call != c || time.Since(op.finished) > resultTTL {
		return nil
	}
	return op
}

// Keep puts back a result its reconcile could not record (the status
// write failed: a conflict with a spec change, say), unless the lane holds
// another operation by now. The next reconcile takes it again: a Create's
// VM is recorded before the target can move on, rather than left to the
// garbage collector.
func (o *Runner) Keep(obj client.Object, lane types.UID, c Call, value any, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lanes[lane] == nil {
		o.lanes[lane] = &operation{call: c, rv: obj.GetResourceVersion(), finished: time.Now(), value: value, err: err}
	}
}

// start runs fn in the Proxy's lane unless an operation occupies it. The
// operation keeps ctx's values (the logger) but not its deadline or
// cancellation: it outlives the reconcile that started it.
func (o *Runner) start(ctx context.Context, obj client.Object, lane types.UID, provider string, c Call, fn func(context.Context) (any, error)) {
	o.mu.Lock()
	if o.lanes[lane] != nil {
		o.mu.Unlock()
		return
	}
	// Drop the results nobody took, such as a Proxy's whose finalizer a
	// person removed: they are stale by now.
	for uid, op := range o.lanes {
		if !op.finished.IsZero() && time.Since(op.finished) > resultTTL {
			delete(o.lanes, uid)
		}
	}
	// And the back-offs long past: failures that far apart are not in a
	// row, and a deleted Proxy's would stay for good.
	for uid, until := range o.until {
		if time.Since(until) > o.BackoffMax+resultTTL {
			delete(o.until, uid)
		}
	}
	if o.backoff != nil {
		o.backoff.GC()
	}
	op := &operation{call: c, rv: obj.GetResourceVersion()}
	o.lanes[lane] = op
	wait := time.Until(o.until[lane])
	reset := o.backoffsReset
	o.wg.Add(1)
	o.mu.Unlock()

	key := client.ObjectKeyFromObject(obj)
	octx, cancel := o.context(ctx)
	go func() {
		defer o.wg.Done()
		defer cancel()
		if wait > 0 {
			// Backing off: the call waits, its lane held; a stop cuts
			// the wait short and fn returns at once on the ended ctx.
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-reset:
			case <-octx.Done():
			}
			t.Stop()
		}
		inFlight := metrics.OperationsInFlight.WithLabelValues(provider, c.Method)
		inFlight.Inc()
		v, err := fn(octx)
		inFlight.Dec()
		o.mu.Lock()
		op.value, op.err, op.finished = v, err, time.Now()
		o.backOff(lane, err)
		o.mu.Unlock()
		o.notify(key)
	}()
}

// Retire runs fn, a delete nothing waits for, unless one for providerID
// runs already.
func (o *Runner) Retire(ctx context.Context, provider, providerID string, fn func(context.Context)) {
	o.mu.Lock()
	if o.retiring[providerID] {
		o.mu.Unlock()
		return
	}
	o.retiring[providerID] = true
	o.wg.Add(1)
	o.mu.Unlock()

	octx, cancel := o.context(ctx)
	go func() {
		defer o.wg.Done()
		defer cancel()
		inFlight := metrics.OperationsInFlight.WithLabelValues(provider, MethodDelete)
		inFlight.Inc()
		fn(octx)
		inFlight.Dec()
		o.mu.Lock()
		delete(o.retiring, providerID)
		o.mu.Unlock()
	}()
}

// context returns ctx's values under the operations' own cancellation.
func (o *Runner) context(ctx context.Context) (context.Context, context.CancelFunc) {
	octx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(o.base, cancel)
	return octx, func() { stop(); cancel() }
}

// Wakes delivers the object of each operation that ended: a source of
// the controller, which reconciles it at once.
func (o *Runner) Wakes() <-chan event.GenericEvent { return o.wake }

// notify reconciles the Proxy at once.
func (o *Runner) notify(key client.ObjectKey) {
	// Only the key matters to the controller's handler.
	wake := event.GenericEvent{Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}
	select {
	case o.wake <- wake:
	case <-o.base.Done():
	}
}

// Running reports whether an operation of the Proxy runs now.
func (o *Runner) Running(uid types.UID) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	op := o.lanes[uid]
	return op != nil && op.finished.IsZero()
}

// Busy reports whether an operation of any of the Proxy's lanes runs now.
func (o *Runner) Busy(uid types.UID) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for key, op := range o.lanes {
		if (key == uid || strings.HasPrefix(string(key), string(uid)+"/")) && op.finished.IsZero() {
			return true
		}
	}
	return false
}

// Creating returns the name of the instance a Create of the Proxy makes,
// running or ended and not yet taken; "" when there is none.
func (o *Runner) Creating(uid types.UID) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if op := o.lanes[uid]; op != nil && op.call.Method == MethodCreate {
		return op.call.Arg
	}
	return ""
}

// StartedAt returns the resourceVersion the Proxy had when its finished,
// untaken operation started.
func (o *Runner) StartedAt(uid types.UID) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	op := o.lanes[uid]
	if op == nil || op.finished.IsZero() {
		return "", false
	}
	return op.rv, true
}

// The methods an operation runs, as the in-flight metric names them.
const (
	MethodCreate   = "Create"
	MethodGet      = "Get"
	MethodDelete   = "Delete"
	MethodFinalize = "Finalize"
	// MethodClear deletes every VM of a replica before it takes its
	// static address (the controller's clearReplica).
	MethodClear = "Clear"
)
