package readiness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/egress-proxies/egress-proxies-operator/images/cloudinit"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/userdata"
)

// watchProber answers the serving watch: an address in dead does not
// answer; any other gives counters when asked for them. Like a dial, a
// probe whose context has ended answers nothing.
type watchProber struct {
	mu     sync.Mutex
	dead   []string
	probed []string // "ip:port stats"
}

func (p *watchProber) Probe(ctx context.Context, ip string, port int32, stats bool) (*cloudinit.Stats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.probed = append(p.probed, fmt.Sprintf("%s:%d %v", ip, port, stats))
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if slices.Contains(p.dead, ip) {
		return nil, errors.New("dial tcp " + ip + ": i/o timeout")
	}
	if stats {
		return &cloudinit.Stats{Open: 1, Connections: 7}, nil
	}
	return nil, nil
}

// One round of the serving watch probes exactly the Ready replicas' VMs
// of the Proxies of more than one replica that are not being deleted,
// asks only a VM of the current default cloud-init for its counters and
// passes them on, and wakes each Proxy with a VM not answering once.
func TestServingWatchProbesServingReplicasAndWakesTheirProxy(t *testing.T) {
	clients := []string{"10.0.0.0/8"}
	proxy := func(name string, replicas int32, slots ...v1alpha1.ReplicaStatus) *v1alpha1.Proxy {
		p := &v1alpha1.Proxy{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"},
			Spec:       v1alpha1.ProxySpec{Replicas: replicas, Port: 3128},
			Status:     v1alpha1.ProxyStatus{Replicas: slots},
		}
		return p
	}
	slot := func(k int32, ready bool, ip string, hash string) v1alpha1.ReplicaStatus {
		return v1alpha1.ReplicaStatus{Index: k, Ready: ready, Address: ip,
			Instance: &v1alpha1.InstanceRef{Name: fmt.Sprintf("vm-%s", ip), ProviderID: "lab/" + ip, IP: ip, Port: 3128, CloudInitHash: hash}}
	}
	current := func(p *v1alpha1.Proxy) string {
		data, err := userdata.Default(p, clients)
		if err != nil {
			t.Fatal(err)
		}
		return replica.CloudInitHash(data)
	}
	two := proxy("two", 2)
	two.Status.Replicas = []v1alpha1.ReplicaStatus{slot(0, true, "10.1.0.1", current(two)), slot(1, true, "10.1.0.2", "an-older-one")}
	dying := proxy("dying", 2)
	dying.Status.Replicas = []v1alpha1.ReplicaStatus{slot(0, true, "10.2.0.1", current(dying)), slot(1, true, "10.2.0.2", current(dying))}
	booting := proxy("booting", 2, slot(0, false, "10.3.0.1", ""), slot(1, true, "10.3.0.2", ""))
	booting.Spec.CloudInit = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "own"}, Key: "user-data"}
	single := proxy("single", 1)
	single.Status.Instance = &v1alpha1.InstanceRef{Name: "vm-single", ProviderID: "lab/10.4.0.1", IP: "10.4.0.1"}
	single.Status.Replicas = []v1alpha1.ReplicaStatus{slot(0, true, "10.4.0.1", "")}
	deleting := proxy("deleting", 2, slot(0, true, "10.5.0.1", ""), slot(1, true, "10.5.0.2", ""))
	deleting.Finalizers, deleting.DeletionTimestamp = []string{v1alpha1.Finalizer}, &metav1.Time{Time: metav1.Now().Time}
	reader := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(two, dying, booting, single, deleting).Build()

	prober := &watchProber{dead: []string{"10.1.0.2", "10.2.0.1", "10.2.0.2"}}
	var mu sync.Mutex
	var woken, observed []string
	w := &Watch{Reader: reader, Prober: prober, DefaultClients: clients,
		Observe: func(namespace, name string, k int, providerID string, s cloudinit.Stats) {
			mu.Lock()
			defer mu.Unlock()
			observed = append(observed, fmt.Sprintf("%s/%s %d %s %d", namespace, name, k, providerID, s.Connections))
		},
		Wake: func(p *v1alpha1.Proxy) {
			mu.Lock()
			defer mu.Unlock()
			woken = append(woken, p.Name)
		}}
	var logged []string
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, args)
	}, funcr.Options{})
	w.round(logr.NewContext(context.Background(), log))

	slices.Sort(prober.probed)
	if want := []string{"10.1.0.1:3128 true", "10.1.0.2:3128 false", "10.2.0.1:3128 true", "10.2.0.2:3128 true", "10.3.0.2:3128 false"}; !slices.Equal(prober.probed, want) {
		t.Errorf("probed %q, want %q", prober.probed, want)
	}
	slices.Sort(woken)
	if want := []string{"dying", "two"}; !slices.Equal(woken, want) {
		t.Errorf("woke %q, want %q (each once)", woken, want)
	}
	if want := []string{"team/two 0 lab/10.1.0.1 7"}; !slices.Equal(observed, want) {
		t.Errorf("observed %q, want %q", observed, want)
	}
	// Each probe that failed is logged, naming the Proxy, the replica and
	// the address: the first sign of a VM's death in the operator's log.
	slices.Sort(logged)
	for i, want := range []string{`"name"="dying" "replica"=0 "address"="10.2.0.1:3128"`, `"name"="dying" "replica"=1 "address"="10.2.0.2:3128"`, `"name"="two" "replica"=1 "address"="10.1.0.2:3128"`} {
		if i >= len(logged) || !strings.Contains(logged[i], want) {
			t.Errorf("logged %q, want a line with %s for each failed probe", logged, want)
			break
		}
	}
	if len(logged) != 3 {
		t.Errorf("logged %d lines, want one per failed probe (3): %q", len(logged), logged)
	}
}

// scheme holds the operator's API: all the test's fake client reads.
func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}
