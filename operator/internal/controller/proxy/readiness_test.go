package proxy

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/readiness"
)

// A serving proxy that misses a probe or two keeps serving: on a busy
// host a probe times out while the proxy is fine (make e2e saw a replica
// leave the Service for one probe while its neighbour booted). It is not
// Ready only after readiness.FailureThreshold probes in a row fail, and is again at
// the next answer.
func TestServingProxyLeavesOnlyAfterProbesInARowFail(t *testing.T) {
	p := newProxy(t, "flaky-probe", nil)
	ip := bootGuest(t, p, current)
	waitReady(t, p)

	// Watch the Ready condition and the endpoints until told to stop.
	var mu sync.Mutex
	var lost []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			got := get(t, p)
			c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
			eps := allEndpoints(t, p)
			if c == nil || c.Status != "True" || !slices.Contains(eps, ip) {
				why := "no Ready condition"
				if c != nil {
					why = c.Reason + ": " + c.Message
				}
				mu.Lock()
				lost = append(lost, why)
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	failingProbes.Store(readiness.FailureThreshold - 1)
	eventually(t, "the failing probes are spent", func() bool { return failingProbes.Load() <= 0 })
	// A probe that answers follows: the count starts again.
	waitProbed(t)
	failingProbes.Store(readiness.FailureThreshold - 1)
	eventually(t, "the failing probes are spent again", func() bool { return failingProbes.Load() <= 0 })
	waitProbed(t)
	close(stop)
	wg.Wait()
	if len(lost) > 0 {
		t.Errorf("%d failed probes in a row (twice) took the proxy out of service: %v", readiness.FailureThreshold-1, slices.Compact(lost))
	}

	// Exactly the threshold takes it out of service; the next answer
	// brings it back.
	var unreachable atomic.Bool
	done := make(chan struct{})
	wg.Go(func() {
		for {
			if readyCondition(get(t, p)).Reason == v1alpha1.ReasonProxyUnreachable {
				unreachable.Store(true)
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	failingProbes.Store(readiness.FailureThreshold)
	eventually(t, "the threshold's failing probes are spent", func() bool { return failingProbes.Load() <= 0 })
	waitProbed(t)
	waitReady(t, p)
	close(done)
	wg.Wait()
	if !unreachable.Load() {
		t.Errorf("%d failed probes in a row left the proxy in service", readiness.FailureThreshold)
	}

	// A proxy that stops answering is not Ready once the threshold is met.
	failingProbes.Store(1 << 30)
	defer failingProbes.Store(0)
	eventually(t, "ProxyUnreachable after the threshold", func() bool {
		return readyCondition(get(t, p)).Reason == v1alpha1.ReasonProxyUnreachable
	})
	failingProbes.Store(0)
	waitReady(t, p)
}

// waitProbed waits until the stand-in proxy answered a probe: the next
// one after failingProbes ran out, at most a resync later.
func waitProbed(t *testing.T) {
	t.Helper()
	before := probesAnswered.Load()
	deadline := time.Now().Add(20 * time.Second)
	for probesAnswered.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("no probe answered")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Only the serving instance of a replica that is ready rides out a failed
// probe: a first instance that never answered, and a replacement, report
// ProxyUnreachable at their first failure (nobody uses them yet, so there
// is nothing to protect from a flaky probe).
func TestServingIsTheReadyReplicasOwnInstance(t *testing.T) {
	readyProxy := &v1alpha1.Proxy{}
	meta.SetStatusCondition(&readyProxy.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready"})
	for _, tc := range []struct {
		name  string
		proxy *v1alpha1.Proxy
		ro    role
		want  bool
	}{
		{"the instance of a ready Proxy", readyProxy, roleInstance, true},
		{"the replacement of a ready Proxy", readyProxy, role{repl: true}, false},
		{"the instance of a Proxy not ready yet", &v1alpha1.Proxy{}, roleInstance, false},
		{"the replacement of a Proxy not ready yet", &v1alpha1.Proxy{}, role{repl: true}, false},
	} {
		if got := serving(tc.proxy, tc.ro); got != tc.want {
			t.Errorf("%s: serving = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Only the serving VM of a replica beside others has its probe bounded by
// instances.ServingProbeTimeout and is left in place when found stopped:
// a lone replica has no other VM to take its clients, and a VM that does
// not serve yet may be slow to answer while it boots.
func TestServingBesideOthersOnlyForAServingReplicaOfSeveral(t *testing.T) {
	ready := func(replicas int32) *v1alpha1.Proxy {
		p := &v1alpha1.Proxy{Spec: v1alpha1.ProxySpec{Replicas: replicas}}
		for k := range replicas {
			p.Status.Replicas = append(p.Status.Replicas, v1alpha1.ReplicaStatus{Index: k, Ready: true})
		}
		return p
	}
	notReady := ready(2)
	notReady.Status.Replicas[1].Ready = false
	for _, tc := range []struct {
		name  string
		proxy *v1alpha1.Proxy
		ro    role
		want  bool
	}{
		{"serving replica of two", ready(2), role{index: 1}, true},
		{"the replacement of a replica of two", ready(2), role{index: 1, repl: true}, false},
		{"a replica of two not serving yet", notReady, role{index: 1}, false},
		{"a lone replica", ready(1), role{index: 0}, false},
	} {
		if got := servingBesideOthers(tc.proxy, tc.ro); got != tc.want {
			t.Errorf("%s: servingBesideOthers = %v, want %v", tc.name, got, tc.want)
		}
	}
}
