package proxy

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// testDrain is the suite's Timing.Drain: long enough that a Delete sent
// without waiting for it cannot look drained, short enough for the tests.
const testDrain = time.Second

// endpointLog records, every few milliseconds, which addresses the
// Proxy's EndpointSlices list.
type endpointLog struct {
	mu    sync.Mutex
	times []time.Time
	sets  [][]string
}

func watchEndpoints(t *testing.T, p *v1alpha1.Proxy) *endpointLog {
	t.Helper()
	l := &endpointLog{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			got := allEndpoints(t, p)
			l.mu.Lock()
			l.times, l.sets = append(l.times, time.Now()), append(l.sets, got)
			l.mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	t.Cleanup(func() { close(stop); wg.Wait() })
	return l
}

// unlistedBefore returns how long before at the address was last seen
// leaving the endpoints: from the first observation without it, after the
// last one with it, to at. It is at most the real time out of the
// Service. ok is false when the last observation before at still listed
// it, or none did.
func (l *endpointLog) unlistedBefore(addr string, at time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var left time.Time
	listed := false
	for i, seen := range l.times {
		if seen.After(at) {
			break
		}
		switch has := slices.Contains(l.sets[i], addr); {
		case has:
			listed, left = true, time.Time{}
		case listed && left.IsZero():
			left = seen
		}
	}
	if left.IsZero() {
		return 0, false
	}
	return at.Sub(left), true
}

// checkDrained checks that the VM id, which served at addr, was deleted
// and only testDrain after it left the Proxy's endpoints (with half of it
// allowed for the log's polling).
func checkDrained(t *testing.T, l *endpointLog, what, id, addr string) {
	t.Helper()
	var at time.Time
	eventually(t, what+": the old VM "+id+" is deleted", func() bool {
		v, ok := deletedAt.Load(id)
		if ok {
			at = v.(time.Time)
		}
		return ok
	})
	gap, ok := l.unlistedBefore(addr, at)
	switch {
	case !ok:
		t.Errorf("%s: VM %s was deleted while the Service still listed %s", what, id, addr)
	case gap < testDrain/2:
		t.Errorf("%s: VM %s was deleted %s after %s left the Service; want a drain of %s", what, id, gap.Round(time.Millisecond), addr, testDrain)
	default:
		t.Logf("%s: VM %s deleted %s after %s left the Service", what, id, gap.Round(time.Millisecond), addr)
	}
}

// A VM that served through the Service is deleted only a drain after it
// left the Service's endpoints, so its clients are not sent to a VM that
// is gone: the replicas replaced one by one on their addresses, the
// replica a scale-down removes, and the old VM of a one-replica Proxy
// replaced make-before-break.
func TestServingVMsDrainBeforeTheyAreDeleted(t *testing.T) {
	t.Run("rolling and scale-down", func(t *testing.T) {
		newPool(t, "rep-drain", "198.51.100.160-198.51.100.161")
		p := newProxy(t, "rep-drain", func(p *v1alpha1.Proxy) { p.Spec.Replicas, p.Spec.AddressPool = 2, "rep-drain" })
		playGuests(t, p)
		before := readyN(t, p, 2)
		log := watchEndpoints(t, p)
		updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Port = 3129 })
		for _, r := range before.Status.Replicas {
			checkDrained(t, log, fmt.Sprintf("replica %d replaced", r.Index), r.Instance.ProviderID, r.Address)
		}
		rolled := readyN(t, p, 2)
		updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Replicas = 1 })
		gone := replicaOf(&rolled.Status, 1)
		checkDrained(t, log, "replica 1 scaled away", gone.Instance.ProviderID, gone.Address)
	})
	t.Run("make-before-break", func(t *testing.T) {
		p := newProxy(t, "drain-mbb", nil)
		bootGuest(t, p, current)
		old := waitReady(t, p).Status.Instance
		log := watchEndpoints(t, p)
		updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Port = 3129 })
		bootGuest(t, p, replacement)
		checkDrained(t, log, "one replica replaced", old.ProviderID, old.IP)
	})
}

// watchMessages records, every few milliseconds, every distinct message
// the Proxy's status gives: the Ready condition's and each replica's.
func watchMessages(t *testing.T, p *v1alpha1.Proxy) (seen func() []string) {
	t.Helper()
	var mu sync.Mutex
	var msgs []string
	add := func(m string) {
		if m != "" && !slices.Contains(msgs, m) {
			msgs = append(msgs, m)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			got := get(t, p)
			mu.Lock()
			add(readyCondition(got).Message)
			for _, r := range got.Status.Replicas {
				add(r.Message)
			}
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	t.Cleanup(func() { close(stop); wg.Wait() })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(msgs)
	}
}

// draining returns the messages that announce a drain, and whether one
// announces a drain of nothing.
func draining(msgs []string) (drains []string, zero bool) {
	for _, m := range msgs {
		if strings.Contains(m, "draining for") {
			drains = append(drains, m)
			zero = zero || strings.Contains(m, "draining for 0s")
		}
	}
	return drains, zero
}

// A replica replaced on its static address leaves the Service and drains
// before its VM goes, and says so while it drains (never a drain of
// nothing); a one-replica Proxy's does not drain at all: no other VM
// serves its clients meanwhile, so a drain would only lengthen the outage
// (docs/addresses.md).
func TestStaticReplacementDrainsOnlyWhenOthersServe(t *testing.T) {
	t.Run("two replicas", func(t *testing.T) {
		newPool(t, "drain-said", "198.51.100.164-198.51.100.165")
		p := newProxy(t, "drain-said", func(p *v1alpha1.Proxy) { p.Spec.Replicas, p.Spec.AddressPool = 2, "drain-said" })
		playGuests(t, p)
		before := readyN(t, p, 2)
		seen := watchMessages(t, p)
		updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Port = 3129 })
		for _, r := range before.Status.Replicas {
			eventually(t, fmt.Sprintf("replica %d's old VM is deleted", r.Index), func() bool {
				_, ok := deletedAt.Load(r.Instance.ProviderID)
				return ok
			})
		}
		readyN(t, p, 2)
		drains, zero := draining(seen())
		if len(drains) == 0 || zero {
			t.Errorf("the replicas replaced on their addresses announced the drains %q; want one of %s each, none of 0s", drains, testDrain)
		}
	})
	t.Run("one replica", func(t *testing.T) {
		const ip = "198.51.100.166"
		newPool(t, "drain-single", ip)
		p := newProxy(t, "drain-single", withPool("drain-single"))
		bootGuestAt(t, p, current, ip)
		old := waitReady(t, p).Status.Instance
		seen := watchMessages(t, p)
		updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Port = 3129 })
		eventually(t, "the old VM "+old.ProviderID+" is deleted", func() bool {
			_, ok := deletedAt.Load(old.ProviderID)
			return ok
		})
		if drains, _ := draining(seen()); len(drains) > 0 {
			t.Errorf("a one-replica Proxy drained before its replacement on the same address: %q", drains)
		}
	})
}

// A VM whose drain began and that then served again drains the whole
// period when it leaves the Service again: the drain counts from when it
// last left, not from when it first did. Here a replica is scaled away
// and back before its drain ends, then away again. make e2e met the same
// in a roll (docs/testing.md, "The roll's one failed request"): a status
// write lost to a conflict put a replica back in the Service after its
// drain had begun, and its VM was deleted a minute later with no drain,
// while clients were still sent to it.
func TestAVMServingAgainDrainsAgain(t *testing.T) {
	newPool(t, "drain-again", "198.51.100.168-198.51.100.169")
	p := newProxy(t, "drain-again", func(p *v1alpha1.Proxy) { p.Spec.Replicas, p.Spec.AddressPool = 2, "drain-again" })
	playGuests(t, p)
	one := replicaOf(&readyN(t, p, 2).Status, 1)
	log := watchEndpoints(t, p)
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Replicas = 1 })
	// Back to two replicas while replica 1 drains: its VM serves again.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(replicaOf(&get(t, p).Status, 1).Message, "draining for") {
		if time.Now().After(deadline) {
			t.Fatal("replica 1 never said it drains after the scale-down")
		}
		time.Sleep(2 * time.Millisecond)
	}
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Replicas = 2 })
	back := replicaOf(&readyN(t, p, 2).Status, 1)
	if back.Instance == nil || back.Instance.ProviderID != one.Instance.ProviderID {
		t.Fatalf("replica 1 serves on %v after the scale-up, want its VM %s again: the scale-up came after the drain ended", back.Instance, one.Instance.ProviderID)
	}
	eventually(t, "replica 1's VM serves again", func() bool {
		return slices.Contains(allEndpoints(t, p), one.Address)
	})
	// Long after the first drain's period, away again.
	time.Sleep(2 * testDrain)
	updateSpec(t, p, func(p *v1alpha1.Proxy) { p.Spec.Replicas = 1 })
	checkDrained(t, log, "replica 1 scaled away again", one.Instance.ProviderID, one.Address)
}
