package proxy

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/addresses"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controllertest"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/endpoints"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/probe"
)

// startSecondReplica runs a second operator replica on the suite's API
// server and backend, leader election off, as two replicas would run
// during a rollout; it stops at the test's end.
func startSecondReplica(t *testing.T) {
	t.Helper()
	mgr, err := controllertest.NewManager(restConfig, ctrl.Options{Scheme: testScheme, Cache: endpoints.CacheOptions(),
		Controller: crconfig.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: testScheme, Recorder: mgr.GetEventRecorder("egress-proxies-operator"),
		Providers: set, DefaultAllowedClients: []string{"10.0.0.0/8"},
		Prober: probe.HTTPProxy{Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, standIn.Addr().String())
		}, Timeout: time.Second},
		Timing: Timing{Poll: 100 * time.Millisecond, Resync: 300 * time.Millisecond, QuotaBackoff: time.Second, PermanentRetry: 2 * time.Second},
		Bounds: Bounds{Deadline: testDeadline},
	}).SetupWithManager(context.Background(), mgr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(controllertest.Start(mgr, func(err error) { t.Errorf("second replica: %v", err) }))
}

// Two replicas allocating for 50 Proxies created at once never hand one
// address out twice, and every Proxy gets one: the API server's name
// uniqueness is the only lock.
func TestTwoReplicasNeverHandOutAnAddressTwice(t *testing.T) {
	startSecondReplica(t)
	const n = 50
	newPool(t, "race", "198.51.100.100-198.51.100.159")
	proxies := make([]*v1alpha1.Proxy, n)
	created := make(chan *v1alpha1.Proxy, n)
	for i := range n {
		go func() {
			p := &v1alpha1.Proxy{}
			p.Name, p.Namespace = fmt.Sprintf("race-%02d", i), testNamespace
			p.Spec = v1alpha1.ProxySpec{Provider: testProvider, Port: 3128, AddressPool: "race",
				Placement: v1alpha1.Placement{Region: "r1", MachineType: "small", Image: "debian-12"}}
			if err := k8s.Create(context.Background(), p); err != nil {
				t.Errorf("create %s: %v", p.Name, err)
			}
			created <- p
		}()
	}
	for i := range n {
		proxies[i] = <-created
		t.Cleanup(func() { deleteProxy(t, proxies[i]) })
	}
	byIP := map[string]string{}
	for _, p := range proxies {
		ip := allocated(t, p)
		if other, dup := byIP[ip]; dup {
			t.Errorf("%s handed out to %s and %s", ip, other, p.Name)
		}
		byIP[ip] = p.Name
	}
	// Every Proxy comes to hold exactly one ProxyAddress, the one its
	// status shows: when both replicas allocated for one Proxy at once,
	// the one that lost the status write releases its own.
	eventually(t, "every Proxy holds exactly its own address", func() bool {
		holders := map[string][]string{}
		for _, pa := range addressesOf(t, "race") {
			holders[pa.Spec.Proxy.Name] = append(holders[pa.Spec.Proxy.Name], addresses.IPOf(pa.Spec.Address))
		}
		for _, p := range proxies {
			if a := get(t, p).Status.Addresses; len(holders[p.Name]) != 1 || len(a) != 1 || holders[p.Name][0] != a[0] {
				return false
			}
		}
		return true
	})
	seen := map[string]string{}
	for _, p := range proxies {
		ip := get(t, p).Status.Addresses[0]
		if other, dup := seen[ip]; dup {
			t.Errorf("%s shown by %s and %s", ip, other, p.Name)
		}
		seen[ip] = p.Name
	}
	// The request each VM is made with carries its Proxy's address.
	for _, p := range proxies {
		eventually(t, "the instance of "+p.Name+" is created", func() bool {
			ref := get(t, p).Status.Instance
			return ref != nil && ref.ProviderID != ""
		})
		v, _ := createRequests.Load(get(t, p).Status.Instance.Name)
		if req, _ := v.(contract.CreateRequest); req.Network == nil || req.Network.IP() != get(t, p).Status.Addresses[0] {
			t.Errorf("%s: CreateRequest.Network %v, want %s", p.Name, req.Network, get(t, p).Status.Addresses[0])
		}
	}
}
