// Package controller holds the operator's reconcilers and runnables: the
// Proxy reconciler, the garbage collector and the health checker.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/addresses"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/config"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/endpoints"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/instances"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metrics"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/operation"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/probe"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/readiness"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/tenancy"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/userdata"
)

// Reconciler makes each Proxy's VM exist, run, answer, and be
// reachable through a Service; and removes it when the Proxy goes.
type Reconciler struct {
	client.Client
	// APIReader reads straight from the API server: cloud-init Secrets, so
	// the operator neither caches nor watches every Secret in the cluster
	// (and needs only get on them), and the Services and EndpointSlices the
	// narrowed cache does not hold (CacheOptions); and a Proxy whose
	// operation ended before the cache caught up.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  recorder.EventRecorder
	Providers *providers.Set
	Prober    probe.Prober
	// DefaultAllowedClients is what a Proxy without allowedClients allows.
	DefaultAllowedClients []string
	// AllowedClientsWithin, when set, bounds every Proxy's allowedClients:
	// each network must lie inside one of these.
	AllowedClientsWithin config.Networks
	Timing               Timing
	// Bounds limit how many reconciles run at once and how long each takes.
	Bounds Bounds
	// Tracer makes a span of each reconcile, with the provider calls its
	// operations make beneath it; nil: none.
	Tracer trace.TracerProvider
	// userdata reads each Proxy's cloud-init.
	userdata *userdata.Reader
	// Requeue names Proxies to reconcile now (the credentials.Watcher's
	// events); nil: none.
	Requeue <-chan event.GenericEvent
	// ops runs the provider calls beside the workers.
	ops *operation.Runner
	// publish writes the Proxy's Service and EndpointSlices.
	publish *endpoints.Publisher
	// allocator holds the Proxy's static addresses.
	allocator *addresses.Allocator
	// memory counts serving VMs' failed probes and times the drains of
	// the VMs leaving the Service.
	memory readiness.Memory
	// traffic turns what the probes read into the Proxies' traffic series.
	traffic metrics.Traffic
	// wakes carries the Proxies the serving watch found a VM of not
	// answering.
	wakes chan event.GenericEvent
}

// wake reconciles the Proxy now, unless a wake is already pending for a
// full channel (the watch's next round tries again).
func (r *Reconciler) wake(proxy *v1alpha1.Proxy) {
	select {
	case r.wakes <- event.GenericEvent{Object: proxy}:
	default:
	}
}

// publishService writes the Proxy's Service and EndpointSlice from its
// status, and tells the memory which VMs serve through them: a VM put back
// in the Service after its drain began drains the whole period again when
// it leaves (readiness.Memory.Serves).
func (r *Reconciler) publishService(ctx context.Context, proxy *v1alpha1.Proxy) error {
	if err := r.publish.Ensure(ctx, proxy); err != nil {
		return err
	}
	for _, id := range replica.ServingVMs(proxy) {
		r.memory.Serves(id)
	}
	return nil
}

// forget drops what the reconciler holds of a VM once it is deleted.
func (r *Reconciler) forget(providerID string) {
	r.memory.Forget(providerID)
	r.traffic.Forget(providerID)
}

// DefaultDrain is Timing.Drain's default: kube-proxy's iptables and
// nftables modes resync at most once a second (--iptables-min-sync-period,
// 1 s), so new connections have left a VM well within it; requests in
// flight through it have the rest.
const DefaultDrain = 10 * time.Second

// DefaultWatch is Timing.Watch's default: with a probe's timeout of half
// a second, a dead VM of a replica is found 0.5 to 1.5 s after it died.
const DefaultWatch = time.Second

// DefaultResync is Timing.Resync's default: a VM deleted or stopped
// behind the operator's back is found within a minute.
const DefaultResync = time.Minute

// Timing holds the reconciler's waits; zero values take the defaults.
type Timing struct {
	// Poll is the wait between checks of a VM that is not ready yet.
	Poll time.Duration
	// Probe is the wait between probes of a running VM whose proxy does
	// not answer yet (it is still booting or running cloud-init). A probe
	// reaches only the VM, never the backend's API, so it comes sooner
	// than Poll; the default is 1 s, or Poll if that is shorter.
	Probe time.Duration
	// Resync is the wait between checks of a Ready proxy, which notice a VM
	// deleted or stopped behind the operator's back.
	Resync time.Duration
	// QuotaBackoff is the wait after a quota error.
	QuotaBackoff time.Duration
	// PermanentRetry is the wait after a permanent error: long, since only
	// a person's change can fix it, and a spec change reconciles at once.
	PermanentRetry time.Duration
	// Watch is the period of the serving watch: every serving VM of a
	// Proxy of more than one replica is probed that often between
	// resyncs, and one that does not answer is checked at once
	// (readiness.Watch). Negative: no watch. Default 1 s.
	Watch time.Duration
	// Drain is how long a VM that served through the Service keeps running
	// after it left the Service's endpoints, before it is deleted: a
	// replaced VM of a replica, a replica scaled away, the old VM of a
	// make-before-break replacement (readiness.Memory).
	Drain time.Duration
}

func (t Timing) withDefaults() Timing {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&t.Poll, 5*time.Second)
	def(&t.Probe, min(time.Second, t.Poll))
	def(&t.Resync, DefaultResync)
	def(&t.QuotaBackoff, 5*time.Minute)
	def(&t.PermanentRetry, 30*time.Minute)
	def(&t.Drain, DefaultDrain)
	def(&t.Watch, DefaultWatch)
	return t
}

// +kubebuilder:rbac:groups=egressproxies.io,resources=proxies,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=egressproxies.io,resources=proxies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=egressproxies.io,resources=proxies/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=egressproxies.io,resources=addresspools,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=egressproxies.io,resources=proxyaddresses,verbs=get;list;watch;create;delete

// SetupWithManager registers the reconciler: Bounds.Workers reconciles at
// once (three by default, docs/architecture.md, Principles), each within Bounds.Deadline,
// reacting to spec changes, to changes of the Services and EndpointSlices
// it owns, to Requeue, and to the end of each Proxy's provider operation;
// and the Proxies of a pool to a released address or a pool's change (ctx
// bounds the field index's set-up).
// The owned objects' creation is the reconciler's own doing: reacting to
// it would only reconcile again on a stale copy.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	r.Timing = r.Timing.withDefaults()
	r.Bounds = r.Bounds.withDefaults()
	r.ops = operation.New()
	r.publish = &endpoints.Publisher{Client: r.Client, Reader: r.APIReader, Scheme: r.Scheme}
	r.userdata = &userdata.Reader{Secrets: r.APIReader, Reviews: r.Client, DefaultAllowedClients: r.DefaultAllowedClients}
	r.allocator = &addresses.Allocator{Client: r.Client, APIReader: r.APIReader, Recorder: r.Recorder}
	r.ops.BackoffMax = r.Timing.Resync
	if err := mgr.Add(r.ops); err != nil {
		return err
	}
	r.wakes = make(chan event.GenericEvent, 256)
	if r.Timing.Watch > 0 {
		if err := mgr.Add(&readiness.Watch{Reader: r.Client, Prober: r.Prober, Period: r.Timing.Watch,
			DefaultClients: r.DefaultAllowedClients, Observe: r.traffic.Observe, Wake: r.wake}); err != nil {
			return err
		}
	}
	notCreated := builder.WithPredicates(predicate.Funcs{CreateFunc: func(event.CreateEvent) bool { return false }})
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.Proxy{}, indexAddressPool, addressPoolOf); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Proxy{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, rollChanged))).
		Owns(&corev1.Service{}, notCreated).
		Owns(&discoveryv1.EndpointSlice{}, notCreated).
		// A released address, or a new or edited pool, wakes the Proxies
		// of the pool: one may be waiting for it.
		Watches(&v1alpha1.ProxyAddress{}, handler.EnqueueRequestsFromMapFunc(r.proxiesOfPool(func(o client.Object) string {
			return o.(*v1alpha1.ProxyAddress).Spec.Pool
		})), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
			UpdateFunc: func(event.UpdateEvent) bool { return false },
		})).
		Watches(&v1alpha1.AddressPool{}, handler.EnqueueRequestsFromMapFunc(r.proxiesOfPool(client.Object.GetName)),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.proxiesOfNamespace),
			builder.WithPredicates(namespaceLabelsChanged)).
		WatchesRawSource(r.requeueSource()).
		WatchesRawSource(source.Channel(r.ops.Wakes(), &handler.EnqueueRequestForObject{})).
		WatchesRawSource(source.Channel(r.wakes, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: r.Bounds.Workers,
			ReconciliationTimeout:   r.Bounds.Deadline,
			// The priority queue folds a Proxy's pending RequeueAfter into
			// the wake at an operation's end; the older queue keeps the
			// earlier of the two, and would run the next step early.
			UsePriorityQueue: ptr.To(true),
		}).
		Named("proxy").
		Complete(r)
}

// Reconcile moves one Proxy a step towards its spec. Status is written
// after every step that changed the world, so a crash anywhere resumes
// without a duplicate VM: the instance name is deterministic, and Create
// finds what an interrupted attempt made.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, err error) {
	ctx, end := r.startReconcile(ctx, req)
	defer func() { end(err) }()
	result, err := r.reconcile(ctx, req)
	if apierrors.IsConflict(err) {
		// The cache has not seen our last write yet. Try again shortly
		// rather than through the error back-off, which grows per conflict
		// and stalls Proxies when many reconcile at once; every step is
		// idempotent, so a retry on fresher data is safe.
		return ctrl.Result{RequeueAfter: r.Timing.Poll}, nil
	}
	return result, err
}

func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var proxy v1alpha1.Proxy
	if err := r.Get(ctx, req.NamespacedName, &proxy); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.staleForALane(&proxy) && r.APIReader != nil {
		// An operation's end wakes the Proxy at once, possibly before the
		// cache holds the status written when it started.
		if err := r.APIReader.Get(ctx, req.NamespacedName, &proxy); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	ctx = withStatusBase(ctx, &proxy)
	entry, configured := r.Providers.Get(proxy.Spec.Provider)
	if !proxy.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &proxy, entry)
	}
	if err := r.patchFinalizer(ctx, &proxy, controllerutil.AddFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	if !configured {
		msg := r.notConfiguredMessage(&proxy)
		replica.SetNotReady(&proxy, v1alpha1.ReasonProviderNotConfigured, msg)
		r.record(&proxy, providerNotConfigured("Configure", msg))
		// Nothing to retry: the config is read at start, and a spec change
		// reconciles again.
		return ctrl.Result{}, r.writeStatus(ctx, &proxy)
	}
	reason, msg := r.refusal(&proxy)
	if reason == "" {
		var err error
		if reason, msg, err = tenancy.Refusal(ctx, r.Client, &proxy, entry); err != nil {
			return ctrl.Result{}, err
		}
	}
	if reason != "" {
		replica.SetNotReady(&proxy, reason, msg)
		r.record(&proxy, refused(reason, msg))
		// Nothing to retry: a spec change, a Namespace's label change, a
		// pool's change or a restart with another config reconciles again.
		return ctrl.Result{}, r.writeStatus(ctx, &proxy)
	}
	if !replica.Multi(&proxy) && r.ops.Running(proxy.UID) {
		return r.awaitingOperation(), nil
	}
	// The addresses come first: they are in the status before any VM
	// exists, and no VM is made without its own.
	networks, waits, err := r.allocator.Allocate(ctx, &proxy)
	if w := (*addresses.Wait)(nil); errors.As(err, &w) {
		return r.awaitAddress(ctx, &proxy, w)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if !replica.Multi(&proxy) && waits[0] != nil {
		return r.awaitAddress(ctx, &proxy, waits[0])
	}
	cloudInit, userCloudInit, err := r.userdata.Read(ctx, &proxy)
	if err != nil {
		return r.cloudInitError(ctx, &proxy, err)
	}
	var user []byte
	if userCloudInit {
		user = cloudInit
	}
	replica.AdoptLegacyHashes(&proxy, replica.SpecHash(&proxy, user), cloudInit, userCloudInit)
	sc := &scope{proxy: &proxy, entry: entry, cloudInit: cloudInit, user: user}
	if !replica.Multi(&proxy) {
		r.noteCloudInit(&proxy, cloudInit)
		return r.step(ctx, sc, 0, networks[0])
	}
	return r.reconcileReplicas(ctx, sc, networks, waits)
}

// scope is what one reconcile's steps work on: the Proxy, its provider
// entry, and the cloud-init its VMs are made from (user: the user's own,
// nil for the default).
type scope struct {
	proxy           *v1alpha1.Proxy
	entry           *providers.Entry
	cloudInit, user []byte
}

// step takes replica k one step towards its spec: the instance it works
// on (target), then its replacement break-before-make, or drive.
func (r *Reconciler) step(ctx context.Context, sc *scope, k int, network *contract.StaticNetwork) (ctrl.Result, error) {
	proxy := sc.proxy
	hash := replica.SpecHash(replica.Spec(proxy, k), sc.user)
	ro := r.target(ctx, sc, k, hash, network)
	if k == 0 && replica.Multi(proxy) {
		r.noteCloudInit(proxy, sc.cloudInit)
	}
	if ro.repl && replica.BreaksBeforeMake(proxy, k, keepsEgress(sc.entry)) {
		return r.breakBeforeMake(ctx, proxy, sc.entry, k)
	}
	return r.drive(ctx, sc, ro, network)
}

// role names which of a Proxy's instances a reconcile works on. Status
// writes replace proxy.Status wholesale, so code holds a role and looks
// the InstanceRef up again rather than keeping a pointer across a write.
type role struct {
	// index is the replica's.
	index int
	// repl: the replica's replacement, else its instance.
	repl bool
}

// roleInstance is replica 0's serving instance.
var roleInstance = role{}

func (ro role) ref(proxy *v1alpha1.Proxy) *v1alpha1.InstanceRef {
	inst, repl := replica.Refs(proxy, ro.index)
	if ro.repl {
		return *repl
	}
	return *inst
}

// target returns the instance the reconcile works on: the current one, or
// the replacement for a changed spec. An abandoned replacement (the spec
// changed again, or back) is deleted.
func (r *Reconciler) target(ctx context.Context, sc *scope, k int, hash string, network *contract.StaticNetwork) role {
	proxy, entry, cloudInit, user := sc.proxy, sc.entry, sc.cloudInit, sc.user
	// Asked before the refs are taken: it may add replicas' entries.
	mayReplace := replica.MayStartReplacement(proxy, k, user)
	instance, replacement := replica.Refs(proxy, k)
	s := struct{ Instance, Replacement *v1alpha1.InstanceRef }{*instance, *replacement}
	defer func() { *instance, *replacement = s.Instance, s.Replacement }()
	ri, rr := role{index: k}, role{index: k, repl: true}
	fresh := func() *v1alpha1.InstanceRef {
		return &v1alpha1.InstanceRef{Name: replica.InstanceName(proxy, hash, k), SpecHash: hash, CloudInitHash: replica.CloudInitHash(cloudInit), Address: addressOf(network)}
	}
	// A Create that ended but is not yet recorded pins its target whatever
	// the spec says now: the VM it made is recorded first, then replaced
	// or retired like any other, rather than left to the garbage collector.
	if name := r.ops.Creating(replica.Lane(proxy, k)); name != "" {
		switch {
		case s.Instance != nil && s.Instance.Name == name && s.Instance.ProviderID == "":
			return ri
		case s.Replacement != nil && s.Replacement.Name == name && s.Replacement.ProviderID == "":
			return rr
		}
	}
	switch {
	case s.Instance == nil:
		s.Instance = fresh()
		return ri
	case s.Instance.SpecHash == hash:
		if s.Replacement != nil {
			r.retire(ctx, proxy, entry, s.Replacement, "the spec changed back", 0)
			s.Replacement = nil
		}
		return ri
	case s.Replacement != nil && s.Replacement.SpecHash == hash:
		return rr
	case s.Replacement == nil && !mayReplace:
		// Rolling: another replica is being replaced, or does not answer;
		// this one keeps serving until it is its turn.
		return ri
	default:
		if s.Replacement != nil {
			r.retire(ctx, proxy, entry, s.Replacement, "the spec changed again", 0)
		}
		s.Replacement = fresh()
		r.record(proxy, replacing(s.Instance.Name, s.Replacement.Name, replica.Describe(proxy, k)))
		return rr
	}
}

// drive takes the target instance one step: create it, wait for it to run,
// probe it, and make it serve. Each provider call is an operation (await):
// the reconcile that starts it returns at once, and the one its end wakes
// goes on with the result.
func (r *Reconciler) drive(ctx context.Context, sc *scope, ro role, network *contract.StaticNetwork) (ctrl.Result, error) {
	proxy, entry, cloudInit := sc.proxy, sc.entry, sc.cloudInit
	target := ro.ref(proxy)
	log := logf.FromContext(ctx).WithValues(contract.LogKeyProvider, entry.Name, contract.LogKeyInstance, target.Name)
	ctx = logf.IntoContext(ctx, log)
	prov := entry.Provider
	uid := string(proxy.UID)

	var seen instances.Observed
	if target.ProviderID == "" {
		// Record the name before creating, so the garbage collector and a
		// restarted operator both know the VM is wanted. A retry keeps the
		// last error on show until it succeeds.
		target.Address, target.Port = addressOf(network), proxy.Spec.Port
		if proxy.Status.LastError == nil {
			r.setProgress(proxy, ro, v1alpha1.ReasonProvisioning, fmt.Sprintf("creating instance %s", target.Name))
		}
		if err := r.writeStatus(ctx, proxy); err != nil {
			return ctrl.Result{}, err
		}
		target = ro.ref(proxy)
		req := contract.CreateRequest{
			Name:      target.Name,
			UID:       string(proxy.UID),
			Owner:     entry.Owner,
			Placement: replica.Placement(proxy, ro.index),
			CloudInit: cloudInit,
			Port:      proxy.Spec.Port,
			Network:   network,
			Replica:   int32(ro.index),
		}
		created := operation.Call{Method: operation.MethodCreate, Arg: target.Name}
		var done bool
		var err error
		seen, done, err = operation.AwaitIn(ctx, r.ops, proxy, replica.Lane(proxy, ro.index), entry.Name, created, func(ctx context.Context) (instances.Observed, error) {
			inst, err := prov.Create(ctx, req)
			if err != nil {
				return instances.Observed{}, err
			}
			// Go on with what Create returned: a VM that already runs with
			// an address is probed now, not one poll later.
			return instances.Look(ctx, prov, inst, instances.Sight{Prober: r.Prober, UID: uid, Port: req.Port, Stats: proxy.Spec.CloudInit == nil}), nil
		})
		if !done {
			return r.awaitingOperation(), nil
		}
		if err != nil {
			return r.providerErrorFor(ctx, proxy, ro, "Create", err)
		}
		inst := seen.Inst
		if !instances.CarriesUID(inst, uid) {
			return r.notOwned(ctx, proxy, ro, "Create", inst)
		}
		replica.Observe(target, inst)
		r.setProgress(proxy, ro, v1alpha1.ReasonProvisioning, "instance created; waiting for it to run")
		if err := r.writeStatus(ctx, proxy); err != nil {
			r.ops.Keep(proxy, replica.Lane(proxy, ro.index), created, seen, nil)
			return ctrl.Result{}, err
		}
		// After the write: a result kept after a failed write is taken
		// again, and must not announce the VM twice.
		target = ro.ref(proxy)
		r.record(proxy, instanceCreated(target.Name, inst.ProviderID, replica.Describe(proxy, ro.index)))
		log.Info("created instance", "providerID", inst.ProviderID)
	} else {
		providerID := target.ProviderID
		how := instances.Sight{Prober: r.Prober, UID: uid, Port: replica.PortOf(proxy, target),
			Stats: replica.ServesStats(proxy, target, replica.CloudInitHash(cloudInit)), Serving: servingBesideOthers(proxy, ro)}
		var done bool
		var err error
		seen, done, err = operation.AwaitIn(ctx, r.ops, proxy, replica.Lane(proxy, ro.index), entry.Name, operation.Call{Method: operation.MethodGet, Arg: providerID}, func(ctx context.Context) (instances.Observed, error) {
			return instances.Check(ctx, prov, providerID, how)
		})
		if !done {
			return r.awaitingOperation(), nil
		}
		if errors.Is(err, contract.ErrNotFound) {
			msg := fmt.Sprintf("instance %s (%s) no longer exists; creating it again", target.Name, target.ProviderID)
			r.record(proxy, instanceGone(msg))
			log.Info("instance gone; recreating", "providerID", target.ProviderID)
			*target = v1alpha1.InstanceRef{Name: target.Name, SpecHash: target.SpecHash, CloudInitHash: replica.CloudInitHash(cloudInit), Address: target.Address, Port: target.Port}
			r.setProgress(proxy, ro, v1alpha1.ReasonInstanceGone, msg)
			return ctrl.Result{RequeueAfter: time.Millisecond}, r.writeStatus(ctx, proxy)
		}
		if err != nil {
			return r.providerErrorFor(ctx, proxy, ro, "Get", err)
		}
		if !instances.CarriesUID(seen.Inst, uid) {
			return r.notOwned(ctx, proxy, ro, "Get", seen.Inst)
		}
		replica.Observe(target, seen.Inst)
	}

	switch seen.Inst.State {
	case contract.StateRunning:
		if want := addresses.IPOf(target.Address); want != "" && seen.Inst.IP != want {
			// The provider reports the allocated address only (contract
			// §2.2); anything else is not the address users allow-listed.
			r.setProgress(proxy, ro, v1alpha1.ReasonProvisioning,
				fmt.Sprintf("instance %s reports address %q; waiting for the allocated %s", target.Name, seen.Inst.IP, want))
			break
		}
		return r.serve(ctx, proxy, entry, ro, seen)
	case contract.StateStopped, contract.StateTerminated:
		if !seen.Deleted {
			// It serves (look): out of the Service in this reconcile,
			// and deleted by the next one's operation.
			log.Info("serving instance down; taking it out of the Service before deleting it", "state", seen.Inst.State)
			reason := v1alpha1.ReasonInstanceStopped
			if seen.Inst.State == contract.StateTerminated {
				reason = v1alpha1.ReasonInstanceGone
			}
			r.setProgress(proxy, ro, reason,
				fmt.Sprintf("instance %s is %s; it leaves the Service, then it is deleted and created again", target.Name, seen.Inst.State))
			return ctrl.Result{RequeueAfter: time.Millisecond}, r.writeStatus(ctx, proxy)
		}
		if seen.Inst.State == contract.StateStopped {
			msg := fmt.Sprintf("instance %s stopped; deleting it to create it again", target.Name)
			r.record(proxy, instanceStopped(msg))
			if seen.DeleteErr != nil {
				return r.providerErrorFor(ctx, proxy, ro, "Delete", seen.DeleteErr)
			}
			r.setProgress(proxy, ro, v1alpha1.ReasonInstanceStopped, msg)
			break
		}
		// Terminated: the operation deleted it too (look); a cut-off
		// Delete leaves nothing on the backend to finish it.
		if seen.DeleteErr != nil {
			return r.providerErrorFor(ctx, proxy, ro, "Delete", seen.DeleteErr)
		}
		r.setProgress(proxy, ro, v1alpha1.ReasonInstanceGone, fmt.Sprintf("instance %s is being deleted; it will be created again", target.Name))
	default:
		r.setProgress(proxy, ro, v1alpha1.ReasonProvisioning, fmt.Sprintf("instance %s is %s", target.Name, seen.Inst.State))
	}
	return ctrl.Result{RequeueAfter: r.Timing.Poll}, r.writeStatus(ctx, proxy)
}

// serve takes a running target whose proxy answers (seen.Probed is nil; the
// operation that found it running probed it) and makes it the serving
// instance: a replacement takes over and the instance it replaces is
// deleted.
func (r *Reconciler) serve(ctx context.Context, proxy *v1alpha1.Proxy, entry *providers.Entry, ro role, seen instances.Observed) (ctrl.Result, error) {
	s := &proxy.Status
	target := ro.ref(proxy)
	if err := seen.Probed; err != nil {
		if serving(proxy, ro) {
			if n := r.memory.Failed(target.ProviderID); n < readiness.FailureThreshold {
				logf.FromContext(ctx).Info("probe failed; the proxy keeps serving until more fail in a row",
					"failures", n, "threshold", readiness.FailureThreshold, "error", err.Error())
				return ctrl.Result{RequeueAfter: r.Timing.Probe}, nil
			}
		}
		r.setProgress(proxy, ro, v1alpha1.ReasonProxyUnreachable, err.Error())
		return ctrl.Result{RequeueAfter: r.Timing.Probe}, r.writeStatus(ctx, proxy)
	}
	r.memory.Answered(target.ProviderID)
	if seen.Stats != nil {
		r.traffic.Observe(proxy.Namespace, proxy.Name, ro.index, target.ProviderID, *seen.Stats)
	}
	if replica.Multi(proxy) {
		return r.serveReplica(ctx, proxy, entry, ro)
	}
	if ro.repl {
		old := s.Instance
		s.Instance, s.Replacement = target, nil
		if err := r.publishService(ctx, proxy); err != nil {
			s.Instance, s.Replacement = old, target
			return r.serviceError(ctx, proxy, ro, err)
		}
		replica.MarkReady(proxy)
		if err := r.writeStatus(ctx, proxy); err != nil {
			return ctrl.Result{}, err
		}
		r.record(proxy, replaced(target.Name, target.IP, "", old.Name))
		r.retire(ctx, proxy, entry, old, "replaced", r.Timing.Drain)
		return ctrl.Result{RequeueAfter: r.Timing.Resync}, nil
	}
	if err := r.publishService(ctx, proxy); err != nil {
		return r.serviceError(ctx, proxy, ro, err)
	}
	wasReady := meta.IsStatusConditionTrue(s.Conditions, v1alpha1.ConditionReady)
	replica.MarkReady(proxy)
	if err := r.writeStatus(ctx, proxy); err != nil {
		return ctrl.Result{}, err
	}
	// After the write: a reconcile on a stale copy loses the write with a
	// conflict and must not announce Ready a second time.
	if !wasReady {
		r.record(proxy, answers("proxy", target.IP, proxy.Spec.Port))
	}
	return ctrl.Result{RequeueAfter: r.Timing.Resync}, nil
}

// serviceError records that the Service or EndpointSlice could not be
// written (a full ClusterIP range, say), so the Proxy says why it is not
// Ready, and retries through the controller's back-off. One that is
// someone else's is a conflict (reportConflict).
func (r *Reconciler) serviceError(ctx context.Context, proxy *v1alpha1.Proxy, ro role, err error) (ctrl.Result, error) {
	if conflict := endpoints.AsConflict(err); conflict != nil {
		return r.reportConflict(ctx, proxy, conflict)
	}
	r.setProgress(proxy, ro, v1alpha1.ReasonServiceUnavailable, err.Error())
	r.record(proxy, serviceUnavailable(err))
	if werr := r.writeStatus(ctx, proxy); werr != nil {
		return ctrl.Result{}, errors.Join(err, werr)
	}
	return ctrl.Result{}, err
}

// retire deletes an instance the Proxy no longer wants beside the
// Proxy's own operations (instances.Retire): nothing waits for it. A
// failure is only an event: the instance is neither current nor pending,
// so the garbage collector deletes it later. An instance that served
// through the Service drains first (readiness.Memory).
func (r *Reconciler) retire(ctx context.Context, proxy *v1alpha1.Proxy, entry *providers.Entry, ref *v1alpha1.InstanceRef, why string, drain time.Duration) {
	if ref.ProviderID == "" {
		return
	}
	proxy, name, providerID := proxy.DeepCopy(), ref.Name, ref.ProviderID
	r.ops.Retire(ctx, entry.Name, providerID, func(ctx context.Context) {
		ctx = logf.IntoContext(ctx, logf.FromContext(ctx).WithValues(contract.LogKeyInstance, name, "why", why))
		done := instances.Retire(ctx, entry.Provider, string(proxy.UID), providerID, drain)
		switch {
		case done.Failed == "Get":
			r.record(proxy, deleteFailed("Delete",
				fmt.Sprintf("reading instance %s (%s) before deleting it: %v; the garbage collector will retry", name, why, done.Err)))
		case done.Failed != "":
			r.record(proxy, deleteFailed("Delete",
				fmt.Sprintf("deleting instance %s (%s): %v; the garbage collector will retry", name, why, done.Err)))
		case done.Other != nil:
			r.record(proxy, notOwned("Delete",
				fmt.Sprintf("not deleting instance %s (%s, %s): it carries Proxy UID %q, not this Proxy's %q", name, providerID, why, done.Other.UID, proxy.UID)))
		case done.Deleted:
			r.forget(providerID)
			r.record(proxy, instanceDeleted("Delete", name, why, ""))
		}
	})
}

// awaitingOperation is the result of a reconcile that waits for the
// Proxy's operation: its end reconciles the Proxy at once (Operations'
// wake), so polling meanwhile only spends the workers' time (a thousand
// Proxies queued for a provider were reconciled 25,000 times a second at
// a 20 ms poll; the fleet benchmark, docs/performance.md). The resync period is a backstop.
func (r *Reconciler) awaitingOperation() ctrl.Result {
	return ctrl.Result{RequeueAfter: r.Timing.Resync}
}

// finalize deletes every instance carrying the Proxy's UID — found by
// ListByTag, so one whose Create returned just before a crash is not
// missed — releases the egress addresses kept for it once none is left
// (instances.SweepAndRelease), and then removes the finalizer. Without its
// provider entry it waits (finalizeWithoutEntry). The deletion is one
// operation; it waits for the Proxy's operation in flight, so a
// Create still running has made its instance before the list.
func (r *Reconciler) finalize(ctx context.Context, proxy *v1alpha1.Proxy, entry *providers.Entry) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(proxy, v1alpha1.Finalizer) {
		return ctrl.Result{}, nil
	}
	log := logf.FromContext(ctx)
	if entry == nil {
		return r.finalizeWithoutEntry(ctx, proxy)
	}
	ctx = logf.IntoContext(ctx, log.WithValues(contract.LogKeyProvider, entry.Name))
	if proxy.Status.Phase != v1alpha1.PhaseDeleting {
		proxy.Status.Phase = v1alpha1.PhaseDeleting
		if err := r.writeStatus(ctx, proxy); err != nil {
			return ctrl.Result{}, err
		}
	}
	uid := string(proxy.UID)
	found, done, err := operation.Await(ctx, r.ops, proxy, entry.Name, operation.Call{Method: operation.MethodFinalize, Arg: string(proxy.UID)}, func(ctx context.Context) (instances.Swept, error) {
		return instances.SweepAndRelease(ctx, entry.Provider, entry.Owner, uid, nil, -1)
	})
	if !done {
		return r.awaitingOperation(), nil
	}
	for _, inst := range found.Deleted {
		r.forget(inst.ProviderID)
		r.record(proxy, instanceDeleting(inst.Name, inst.ProviderID))
	}
	for _, e := range found.Released {
		r.record(proxy, egressReleased("Delete", e))
	}
	if err != nil {
		return r.providerError(ctx, proxy, found.Failed, err)
	}
	if len(found.Left) > 0 || r.ops.Busy(proxy.UID) {
		// A replica's Create still running makes its VM after the list.
		return ctrl.Result{RequeueAfter: r.Timing.Poll}, nil
	}
	// Every VM is gone: its addresses may go to another Proxy now.
	if err := r.allocator.ReleaseAll(ctx, proxy); err != nil {
		return ctrl.Result{}, err
	}
	log.Info("all instances deleted; releasing the Proxy")
	return ctrl.Result{}, r.patchFinalizer(ctx, proxy, controllerutil.RemoveFinalizer)
}

// providerError records err on the Proxy and decides when to try again, by
// class (contract §5).
func (r *Reconciler) providerError(ctx context.Context, proxy *v1alpha1.Proxy, op string, err error) (ctrl.Result, error) {
	return r.providerErrorFor(ctx, proxy, roleInstance, op, err)
}

// providerErrorFor is providerError met by the instance in role ro: with
// more than one replica, only that replica is not ready for it.
func (r *Reconciler) providerErrorFor(ctx context.Context, proxy *v1alpha1.Proxy, ro role, op string, err error) (ctrl.Result, error) {
	class := contract.ClassOf(err)
	msg := fmt.Sprintf("%s: %v", op, err)
	proxy.Status.LastError = &v1alpha1.LastError{Class: string(class), Message: msg, Time: metav1.Now()}
	var reason string
	var result ctrl.Result
	var retErr error
	switch class {
	case contract.ClassQuota:
		reason, result = v1alpha1.ReasonQuotaExceeded, ctrl.Result{RequeueAfter: r.Timing.QuotaBackoff}
		r.record(proxy, providerFailed(reason, op, msg))
	case contract.ClassPermanent:
		reason, result = v1alpha1.ReasonProviderError, ctrl.Result{RequeueAfter: r.Timing.PermanentRetry}
		r.record(proxy, providerFailed(reason, op, msg))
	default:
		// Transient (a NotFound here is unexpected and treated alike): the
		// controller's rate limiter backs off exponentially.
		reason, retErr = v1alpha1.ReasonBackendUnavailable, err
	}
	reason = credentialsReason(err, reason)
	switch {
	case !proxy.DeletionTimestamp.IsZero():
	case replica.Multi(proxy):
		r.setProgress(proxy, ro, reason, msg)
	default:
		replica.SetNotReadyUnlessServing(proxy, reason, msg)
	}
	if err := r.writeStatus(ctx, proxy); err != nil && retErr == nil {
		retErr = err
	}
	return result, retErr
}

// patchFinalizer adds or removes (change) the operator's finalizer by a
// merge patch conditional on the Proxy's resourceVersion, as read: the
// finalizers of a Proxy changed since are never overwritten, and the
// conflict reconciles it again. A change that changes nothing writes
// nothing.
func (r *Reconciler) patchFinalizer(ctx context.Context, proxy *v1alpha1.Proxy, change func(client.Object, string) bool) error {
	before := proxy.DeepCopy()
	if !change(proxy, v1alpha1.Finalizer) {
		return nil
	}
	if err := r.Patch(ctx, proxy, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	rebase(ctx, proxy)
	return nil
}
