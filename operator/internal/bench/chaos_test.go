package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/devsim"
)

// TestChaos is the random-kill test of docs/addresses.md's promise (issue
// 33): the operator, a process of its own on the simulated vCenter, is
// SIGKILLed at random moments and started again, while pooled Proxies of
// one to three replicas are created, changed (a port change replaces
// their VMs break-before-make), scaled and deleted. A watcher reads every
// VM of the folder every few milliseconds, straight from vcsim, and
// counts the moments one static address is on two powered-on VMs (the
// address each VM was made for, as its guest applies it). Then the
// operator settles without kills, every Proxy must serve, and their
// deletion must leave no VM and no address.
//
// It runs only when CHAOS_KILLS is set (hack/chaos.sh, make chaos):
// CHAOS_RUNS runs (default 1) of CHAOS_KILLS kills each; CHAOS_SEED
// replays a run's random choices.
func TestChaos(t *testing.T) {
	kills, _ := strconv.Atoi(os.Getenv("CHAOS_KILLS"))
	if kills == 0 {
		t.Skip("CHAOS_KILLS is not set: run hack/chaos.sh")
	}
	runs, err := strconv.Atoi(os.Getenv("CHAOS_RUNS"))
	if err != nil {
		runs = 1
	}
	seed, err := strconv.ParseUint(os.Getenv("CHAOS_SEED"), 10, 64)
	if err != nil {
		seed = uint64(time.Now().UnixNano())
	}
	defer cloneTakes(chaosClone)()
	for run := range runs {
		t.Run(fmt.Sprintf("run=%d,seed=%d", run, seed+uint64(run)), func(t *testing.T) {
			chaosRun(t, run, kills, rand.New(rand.NewPCG(seed+uint64(run), 0)))
		})
	}
}

const (
	// chaosClone is how long vcsim takes to clone: a kill lands inside a
	// Create (between its clone, its metadata write and its power-on) as
	// often as between two.
	chaosClone = 300 * time.Millisecond
	// chaosSettle bounds the wait for every Proxy to serve, and then to be
	// gone, once the kills end.
	chaosSettle = 3 * time.Minute
)

// chaosProxies are the Proxies a run plays with, by their replicas at
// creation.
var chaosProxies = map[string]int32{"solo-a": 1, "solo-b": 1, "duo": 2, "trio": 3}

func chaosRun(t *testing.T, run, kills int, rng *rand.Rand) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, pool := fmt.Sprintf("chaos-%d-%d", run, time.Now().UnixNano()), fmt.Sprintf("chaos-%d", run)
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	defer deleteServices(t, ns)
	net := fmt.Sprintf("198.51.%d", 100+run%100)
	if err := k8s.Create(ctx, &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: pool}, Spec: v1alpha1.AddressPoolSpec{
		Provider: "bench", Addresses: []v1alpha1.PoolAddresses{v1alpha1.PoolAddresses(net + ".10-" + net + ".40")}, Prefix: 24,
		Gateway: v1alpha1.IPv4(net + ".1"),
	}}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = k8s.Delete(context.Background(), &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: pool}})
	}()

	w := watchVMs(ctx, t)
	op := startChild(t, time.Second, providersConfig)
	var wg sync.WaitGroup
	playing, stopPlaying := context.WithCancel(ctx)
	var mu sync.Mutex // rng is not safe for concurrent use
	draw := func(n int) int { mu.Lock(); defer mu.Unlock(); return rng.IntN(n) }
	wg.Go(func() { playUser(playing, t, ns, pool, draw) })
	for range kills {
		time.Sleep(time.Duration(300+draw(2200)) * time.Millisecond)
		op.kill()
		op = startChild(t, time.Second, providersConfig)
	}
	stopPlaying()
	wg.Wait()
	defer func() { op.stop() }()

	// Settled: every Proxy serves with all its replicas, on its addresses.
	chaosWait(t, ns, "every Proxy serves", func(ps []v1alpha1.Proxy) (bool, string) {
		for _, p := range ps {
			if !p.DeletionTimestamp.IsZero() || p.Status.Ready != fmt.Sprintf("%d/%d", p.Spec.Replicas, p.Spec.Replicas) || p.Status.ObservedGeneration != p.Generation {
				why := fmt.Sprintf("%s: %s, phase %s, generation %d observed %d", p.Name, p.Status.Ready, p.Status.Phase, p.Generation, p.Status.ObservedGeneration)
				for _, r := range p.Status.Replicas {
					why += fmt.Sprintf("; replica %d: %s %s", r.Index, r.Reason, r.Message)
				}
				if p.Status.LastError != nil {
					why += "; last error: " + p.Status.LastError.Message
				}
				return false, why
			}
		}
		return true, ""
	})
	if err := k8s.DeleteAllOf(ctx, &v1alpha1.Proxy{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	chaosWait(t, ns, "every Proxy is gone", func(ps []v1alpha1.Proxy) (bool, string) {
		return len(ps) == 0, fmt.Sprintf("%d left", len(ps))
	})
	var left v1alpha1.ProxyAddressList
	if err := k8s.List(ctx, &left, client.MatchingLabels{"egressproxies.io/pool": pool}); err != nil {
		t.Fatal(err)
	}
	vms, samples, moments := w.stop()
	t.Logf("%d kills; %d samples of the folder; %d VMs seen powered on with a static address; %d moments with one address on two", kills, samples, vms, len(moments))
	for _, span := range spans(moments) {
		t.Errorf("one address on two powered-on VMs: %s", span)
	}
	if len(left.Items) > 0 {
		t.Errorf("%d ProxyAddresses of pool %s left after every Proxy was deleted", len(left.Items), pool)
	}
	if vms := folder(t); vms != "" {
		t.Errorf("VMs left in the folder after every Proxy was deleted: %s", vms)
	}
}

// playUser is a platform team's tooling at work until ctx ends: every few
// hundred milliseconds one of chaosProxies is created, has its port
// changed, is scaled or is deleted.
func playUser(ctx context.Context, t *testing.T, ns, pool string, draw func(int) int) {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range chaosProxies {
			if !yield(n) {
				return
			}
		}
	})
	for ctx.Err() == nil {
		time.Sleep(time.Duration(200+draw(500)) * time.Millisecond)
		name := names[draw(len(names))]
		key := client.ObjectKey{Namespace: ns, Name: name}
		var p v1alpha1.Proxy
		err := k8s.Get(ctx, key, &p)
		switch {
		case apierrors.IsNotFound(err):
			// Kubernetes' garbage collector would have deleted the
			// Service of the Proxy of this name deleted before; envtest
			// runs none.
			_ = k8s.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
			_ = k8s.DeleteAllOf(ctx, &discoveryv1.EndpointSlice{}, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: name})
			_ = k8s.Delete(ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
			p = v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.ProxySpec{
				Provider: "bench", Port: 3128, Replicas: chaosProxies[name], AddressPool: pool,
				Placement: v1alpha1.Placement{Region: "dc0", Zone: "c0", MachineType: "small", Image: "debian-12"},
			}}
			err = k8s.Create(ctx, &p)
		case err != nil:
		case !p.DeletionTimestamp.IsZero():
		default:
			action := draw(10)
			if action < 2 {
				err = k8s.Delete(ctx, &p)
				break
			}
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := k8s.Get(ctx, key, &p); err != nil {
					return err
				}
				if action < 6 {
					p.Spec.Port = 3128 + (p.Spec.Port+1)%2
				} else {
					p.Spec.Replicas = int32(1 + draw(3))
				}
				return k8s.Update(ctx, &p)
			})
		}
		if err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// chaosWait polls the namespace's Proxies until done says so, or fails
// after chaosSettle with what done last said.
func chaosWait(t *testing.T, ns, what string, done func([]v1alpha1.Proxy) (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(chaosSettle)
	for {
		var list v1alpha1.ProxyList
		if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		ok, why := done(list.Items)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not %s within %s: %s; the folder: %s", what, chaosSettle, why, folder(t))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// vmWatch samples the folder's VMs straight from vcsim.
type vmWatch struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	samples int
	seen    map[string]bool // VMs seen powered on with a static address
	moments []moment
}

// moment is one sample that saw one address on two VMs.
type moment struct {
	what string
	at   time.Time
}

// watchVMs samples every few milliseconds until stop.
func watchVMs(ctx context.Context, t *testing.T) *vmWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &vmWatch{cancel: cancel, done: make(chan struct{}), seen: map[string]bool{}}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			on, err := addressesOn(ctx)
			if err == nil {
				w.record(on)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { _, _, _ = w.stop() })
	return w
}

func (w *vmWatch) record(on map[string][]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	for ip, vms := range on {
		for _, vm := range vms {
			w.seen[vm] = true
		}
		if len(vms) > 1 {
			slices.Sort(vms)
			w.moments = append(w.moments, moment{fmt.Sprintf("%s on %v", ip, vms), time.Now()})
		}
	}
}

// stop ends the sampling and returns how many VMs it saw powered on with
// a static address, how many samples it took, and the moments one address
// was on two.
func (w *vmWatch) stop() (vms, samples int, moments []moment) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen), w.samples, slices.Clone(w.moments)
}

// spans folds the moments into one line per address and VMs: how many
// samples saw it, from when to when.
func spans(moments []moment) []string {
	var order []string
	first, last, n := map[string]time.Time{}, map[string]time.Time{}, map[string]int{}
	for _, m := range moments {
		if n[m.what] == 0 {
			order, first[m.what] = append(order, m.what), m.at
		}
		n[m.what]++
		last[m.what] = m.at
	}
	out := make([]string, 0, len(order))
	for _, what := range order {
		out = append(out, fmt.Sprintf("%s: %d samples over %s from %s", what, n[what], last[what].Sub(first[what]).Round(time.Millisecond), first[what].Format(time.StampMilli)))
	}
	return out
}

// addressesOn maps each static address to the powered-on VMs of the
// folder made for it (the vSphere provider's address mark).
func addressesOn(ctx context.Context) (map[string][]string, error) {
	dir, err := find.NewFinder(sim.Client, true).Folder(ctx, devsim.Folder)
	if err != nil {
		return nil, err
	}
	v, err := view.NewManager(sim.Client).CreateContainerView(ctx, dir.Reference(), []string{"VirtualMachine"}, true)
	if err != nil {
		return nil, err
	}
	defer func() { _ = v.Destroy(context.WithoutCancel(ctx)) }()
	var vms []mo.VirtualMachine
	if err := v.Retrieve(ctx, []string{"VirtualMachine"}, []string{"name", "runtime.powerState", "config.extraConfig"}, &vms); err != nil {
		return nil, err
	}
	on := map[string][]string{}
	for _, vm := range vms {
		if vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn || vm.Config == nil {
			continue
		}
		if ip := devsim.ExtraConfig(vm.Config.ExtraConfig)[devsim.MarkAddress]; ip != "" {
			on[ip] = append(on[ip], vm.Name)
		}
	}
	return on, nil
}

// folder describes every VM of the folder, its power state and marks;
// "" when there is none.
func folder(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir, err := find.NewFinder(sim.Client, true).Folder(ctx, devsim.Folder)
	if err != nil {
		return err.Error()
	}
	v, err := view.NewManager(sim.Client).CreateContainerView(ctx, dir.Reference(), []string{"VirtualMachine"}, true)
	if err != nil {
		return err.Error()
	}
	defer func() { _ = v.Destroy(ctx) }()
	var vms []mo.VirtualMachine
	if err := v.Retrieve(ctx, []string{"VirtualMachine"}, []string{"name", "runtime.powerState", "config.extraConfig"}, &vms); err != nil {
		return err.Error()
	}
	var out []string
	for _, vm := range vms {
		marks := map[string]string{}
		if vm.Config != nil {
			for k, v := range devsim.ExtraConfig(vm.Config.ExtraConfig) {
				if strings.HasPrefix(k, "egressproxies") {
					marks[k] = v
				}
			}
		}
		out = append(out, fmt.Sprintf("%s %s %v", vm.Name, vm.Runtime.PowerState, marks))
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}
