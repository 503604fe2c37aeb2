package proxy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// The promise users allow-list: an address is on at most one running VM
// (docs/addresses.md). A Create cut off after its VM was made — the answer
// lost to a call timeout, or the operator killed between the power-on and
// the status write — leaves a VM the status has no ID for; these tests
// play that cut and then the step that used to trust the status.

// watchAddresses samples the test backend every few milliseconds until
// the test ends, and returns a func listing every moment seen with one of
// addrs on two live VMs: the address each VM was made with (its
// CreateRequest's network), as the guest applies it.
func watchAddresses(t *testing.T, addrs ...string) (shared func() []string) {
	t.Helper()
	entry, _ := set.Get(testProvider)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var seen []string
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			found, err := entry.Provider.ListByTag(ctx, contract.LabelManaged, testOwner)
			if err == nil {
				on := map[string][]string{}
				for _, inst := range found {
					req, ok := createRequests.Load(inst.Name)
					if !ok || inst.State == contract.StateTerminated || req.(contract.CreateRequest).Network == nil {
						continue
					}
					ip := req.(contract.CreateRequest).Network.IP()
					if slices.Contains(addrs, ip) {
						on[ip] = append(on[ip], inst.Name)
					}
				}
				for ip, vms := range on {
					if len(vms) > 1 {
						slices.Sort(vms)
						mu.Lock()
						if moment := fmt.Sprintf("%s on %v", ip, vms); !slices.Contains(seen, moment) {
							seen = append(seen, moment)
						}
						mu.Unlock()
					}
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// errAnswerLost is what a held Create returns in place of its instance:
// the VM was made and powered on, and the operator never heard of it.
var errAnswerLost = errors.New("read tcp 127.0.0.1:443: connection reset by peer")

func TestBreakBeforeMakeDeletesTheVMACutCreateLeftUnrecorded(t *testing.T) {
	const ip = "198.51.100.200"
	newPool(t, "cut", ip)
	shared := watchAddresses(t, ip)
	held, release := holdCreates(t, "addr-cut")
	p := newProxy(t, "addr-cut", withPool("cut"))
	first := heldCreate(t, held, "no Create was held")
	if err := control.ReportIP(context.Background(), first.ProviderID, ip); err != nil {
		t.Fatal(err)
	}
	// The spec changes while the VM runs unrecorded, then the Create's
	// answer is lost: the replacement goes break-before-make.
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Port = 3129 })
	release(errAnswerLost)
	bootGuestAt(t, p, func(s *v1alpha1.ProxyStatus) *v1alpha1.InstanceRef {
		if s.Instance != nil && s.Instance.Name != first.Name {
			return s.Instance
		}
		return nil
	}, ip)
	eventually(t, "the replacement serves on port 3129", func() bool {
		got := get(t, p)
		return got.Status.Phase == v1alpha1.PhaseReady && got.Status.Instance.Name != first.Name && got.Status.Instance.Port == 3129
	})
	if moments := shared(); len(moments) > 0 {
		t.Errorf("an address was on two live VMs: %v", moments)
	}
	entry, _ := set.Get(testProvider)
	if _, err := entry.Provider.Get(context.Background(), first.ProviderID); !errors.Is(err, contract.ErrNotFound) {
		t.Errorf("the VM the cut Create made (%s) is still there (%v)", first.ProviderID, err)
	}
}

func TestScaleDownDeletesTheVMACutCreateLeftUnrecorded(t *testing.T) {
	addrs := []string{"198.51.100.210", "198.51.100.211"}
	newPool(t, "cut-down", "198.51.100.210-198.51.100.211")
	shared := watchAddresses(t, addrs...)
	held, release := holdCreates(t, "rep-cut")
	p := newProxy(t, "rep-cut", func(p *v1alpha1.Proxy) { p.Spec.Replicas, p.Spec.AddressPool = 2, "cut-down" })
	made := []contract.Instance{heldCreate(t, held, "no Create was held"), heldCreate(t, held, "no Create was held")}
	// Both VMs run; replica 1 is scaled away before its Create's answer
	// comes, and the answer is lost.
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Replicas = 1 })
	release(errAnswerLost)
	playGuests(t, p)
	readyN(t, p, 1)
	eventually(t, "the removed replica's address is released", func() bool { return len(addressesOf(t, "cut-down")) == 1 })
	// Another Proxy takes the released address.
	other := newProxy(t, "rep-cut-other", withPool("cut-down"))
	playGuests(t, other)
	waitReady(t, other)
	if moments := shared(); len(moments) > 0 {
		t.Errorf("an address was on two live VMs: %v", moments)
	}
	kept := get(t, p).Status.Instance.ProviderID
	entry, _ := set.Get(testProvider)
	for _, inst := range made {
		if inst.ProviderID == kept {
			continue
		}
		if _, err := entry.Provider.Get(context.Background(), inst.ProviderID); !errors.Is(err, contract.ErrNotFound) {
			t.Errorf("the VM of removed replica 1 (%s), made by a cut Create, is still there (%v)", inst.ProviderID, err)
		}
	}
}

func TestSecondsUp(t *testing.T) {
	for d, want := range map[time.Duration]time.Duration{
		time.Nanosecond:                 time.Second,
		500 * time.Millisecond:          time.Second,
		time.Second:                     time.Second,
		time.Second + time.Nanosecond:   2 * time.Second,
		2*time.Second - time.Nanosecond: 2 * time.Second,
		5 * time.Second:                 5 * time.Second,
	} {
		if got := secondsUp(d); got != want {
			t.Errorf("secondsUp(%s) = %s, want %s", d, got, want)
		}
	}
}

// Break-before-make waits until the old VM is gone from the backend's
// listing, not only until its Delete returned: a VM whose deletion the
// backend still runs (listed Terminated) may still answer on the address.
func TestBreakBeforeMakeWaitsUntilTheOldVMIsGone(t *testing.T) {
	const ip = "198.51.100.186"
	newPool(t, "linger", ip)
	p := newProxy(t, "linger", withPool("linger"))
	bootGuestAt(t, p, current, ip)
	old := waitReady(t, p).Status.Instance
	// The backend starts deleting the old VM and keeps it listed until
	// finish: the provider's Delete of it returns nil at once.
	finish, err := control.BeginDelete(context.Background(), old.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	defer finish()
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Port = 3129 })
	eventually(t, "the replacement is set up", func() bool {
		r := get(t, p).Status.Replacement
		return r != nil && r.Name != old.Name
	})
	next := get(t, p).Status.Replacement.Name
	time.Sleep(2 * suitePoll)
	if _, made := createRequests.Load(next); made {
		t.Fatalf("the replacement %s was created while the old VM %s was still listed (being deleted): two VMs on %s", next, old.Name, ip)
	}
	finish()
	bootGuestAt(t, p, func(s *v1alpha1.ProxyStatus) *v1alpha1.InstanceRef {
		if s.Instance != nil && s.Instance.Name == next {
			return s.Instance
		}
		return nil
	}, ip)
	eventually(t, "the replacement serves on port 3129", func() bool {
		got := get(t, p)
		return got.Status.Phase == v1alpha1.PhaseReady && got.Status.Instance.Name == next
	})
}
