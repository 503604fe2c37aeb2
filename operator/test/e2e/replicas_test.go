//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// rolled is what rollReplicas measured.
type rolled struct {
	// instance is replica 0's VM after the roll.
	instance string
	// scaleUp is from replicas: 2 to both answering; roll from the roll
	// annotation to both replaced and answering; scaleDown from replicas:
	// 1 to the second replica's address released.
	scaleUp, roll, scaleDown time.Duration
	// sent and failed count the requests of the client of the Service
	// from its first answer through the roll and the scale-down, but for
	// those of the failover.
	sent, failed int
	// failover is replica 1's VM destroyed after the roll.
	failover failedOver
}

// logAround saves the operator's log (roll.log) and picks its lines from
// 3 s before each failed request of the client loop ("<start> fail
// <took> …") to 1 s after it ended: what the operator did to the Service
// and the VMs then.
func logAround(l lane, failures []string) []string {
	log := saveOperatorLogs(l, "roll.log")
	var out []string
	for _, f := range failures {
		fields := strings.Fields(f)
		if len(fields) < 3 {
			continue
		}
		start, err := time.Parse(time.RFC3339Nano, fields[0])
		took, err2 := time.ParseDuration(fields[2])
		if err != nil || err2 != nil {
			continue
		}
		out = append(out, "-- around "+f)
		out = append(out, logBetween(log, start.Add(-3*time.Second), start.Add(took+time.Second))...)
	}
	return out
}

// rollReplicas scales the Ready Proxy p (one replica, static address
// addr, on the port it now has) to two replicas, each on its own address
// of the pool, and has a client Pod send requests through the Service's
// name, one new connection every 100 ms, while the replicas are
// replaced one at a time (the roll annotation) and while the second is
// scaled away. Each replica keeps its address; the origin sees only
// them; no request fails: a replica leaves the Service and drains before
// its VM is deleted (docs/addresses.md).
func rollReplicas(t *testing.T, k8s client.Client, cs kubernetes.Interface, l lane, org *origin, p *v1alpha1.Proxy, addr string) rolled {
	t.Helper()
	ctx := t.Context()
	var out rolled
	key := client.ObjectKeyFromObject(p)
	scaling := time.Now()
	update(ctx, t, k8s, key, func(p *v1alpha1.Proxy) { p.Spec.Replicas = 2 })
	two := waitReplicas(ctx, t, k8s, key, nil, 15*time.Minute)
	out.scaleUp = since(scaling)
	addrs := map[int32]string{}
	old := map[int32]string{}
	for _, r := range two.Status.Replicas {
		addrs[r.Index], old[r.Index] = r.Address, r.Instance.Name
	}
	if addrs[0] != addr || addrs[1] == "" || addrs[1] == addr {
		t.Fatalf("two replicas at %v; want replica 0 at %s and replica 1 at another address of the pool", addrs, addr)
	}
	checkStaticOnDomain(t, l, old[1], addrs[1])
	second := checkProxyAddress(ctx, t, k8s, l, p, addrs[1])
	t.Logf("scaled to 2 replicas in %s: replica 1 on %s (VM %s)", out.scaleUp.Round(time.Millisecond), addrs[1], old[1])

	// The client of the Service: a Pod sending a request through the
	// Service's name every 100 ms, each on a new connection.
	port := int(two.Spec.Port)
	path := "/through-the-service"
	serviceURL := fmt.Sprintf("http://%s.%s.svc:%d", p.Name, p.Namespace, port)
	createPod(ctx, t, cs, clientPod(l, p.Namespace, "client-loop", "loop", serviceURL, org.URL+path, "100ms"))
	within(t, 2*time.Minute, time.Second, "both replicas carry the Service's requests", func() (bool, string) {
		got := slices.Compact(slices.Sorted(slices.Values(org.sources(path))))
		return len(got) == 2, fmt.Sprintf("the origin saw %v", got)
	})

	rolling := time.Now()
	update(ctx, t, k8s, key, func(p *v1alpha1.Proxy) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[v1alpha1.RollAnnotation] = rolling.UTC().Format(time.RFC3339)
	})
	after := waitReplicas(ctx, t, k8s, key, old, 20*time.Minute)
	out.roll = since(rolling)
	for _, r := range after.Status.Replicas {
		if r.Address != addrs[r.Index] {
			t.Errorf("replica %d answers at %s after the roll, was %s", r.Index, r.Address, addrs[r.Index])
		}
		checkStaticOnDomain(t, l, r.Instance.Name, r.Address)
	}
	out.instance = replicaStatus(after, 0).Instance.Name
	t.Logf("rolled both replicas in %s: %s → %s, %s → %s", out.roll.Round(time.Millisecond),
		old[0], out.instance, old[1], replicaStatus(after, 1).Instance.Name)

	// Failover: replica 1's VM dies while the client goes on; its
	// requests from the kill until the replica answers again are the
	// failover's, counted apart (docs/performance.md, "Failover"). The
	// kill comes at a quiet moment: the roll's old VMs are gone, so
	// nothing of the Proxy is in progress and, but for the serving watch,
	// it is next checked at its resync.
	within(t, 5*time.Minute, time.Second, "the roll's old VMs are gone", func() (bool, string) {
		left := slices.DeleteFunc(domains(t, l), func(d string) bool { return d != old[0] && d != old[1] })
		return len(left) == 0, fmt.Sprintf("still defined: %v", left)
	})
	out.failover = killReplica(t, k8s, cs, l, after, 1)
	operatorLog := saveOperatorLogs(l, "failover.log", out.failover.timeline()...)
	t.Logf("failover, as the lane saw it:\n%s\nand the operator's log around it:\n%s",
		strings.Join(out.failover.timeline(), "\n"), strings.Join(out.failover.around(operatorLog), "\n"))
	after = waitReplicas(ctx, t, k8s, key, nil, 5*time.Minute)

	scaling = time.Now()
	update(ctx, t, k8s, key, func(p *v1alpha1.Proxy) { p.Spec.Replicas = 1 })
	vmGone, released := waitReleasedAfterVM(t, k8s, l, second.Name, replicaStatus(after, 1).Instance.Name, 5*time.Minute)
	out.scaleDown = released.Sub(scaling)
	// A few more requests: the one replica left carries them all.
	time.Sleep(3 * time.Second)
	t.Logf("scaled to 1 replica: replica 1's VM gone %s and its address released %s after the change",
		vmGone.Sub(scaling).Round(time.Millisecond), out.scaleDown.Round(time.Millisecond))

	// Every request from the client's first answer on counts.
	var failures []string
	answered := false
	for _, line := range strings.Split(strings.TrimSpace(podLog(ctx, t, cs, p.Namespace, "client-loop")), "\n") {
		at, rest, _ := strings.Cut(line, " ")
		ok := strings.HasPrefix(rest, "ok ")
		if answered = answered || ok; !answered || out.failover.count(line) {
			continue
		}
		out.sent++
		if !ok {
			out.failed++
			failures = append(failures, at+" "+rest)
		}
	}
	t.Logf("the client Pod sent %d requests through %s from its first answer, through the roll and the scale-down; %d failed",
		out.sent, serviceURL, out.failed)
	fo := out.failover
	t.Logf("failover: %d of the %d requests from the kill until replica 1 answered again failed, the last ending %s after the kill; the dead VM left the Service after %s",
		fo.failed, fo.sent, fo.lastFailure.Round(time.Millisecond), fo.endpointGone.Round(time.Millisecond))
	if out.sent == 0 || out.failed > 0 {
		t.Errorf("%d of %d requests through the Service failed during the roll and the scale-down:\n%s\nand the operator's log around them:\n%s",
			out.failed, out.sent, strings.Join(failures, "\n"), strings.Join(logAround(l, failures), "\n"))
	}
	for _, src := range slices.Compact(slices.Sorted(slices.Values(org.sources(path)))) {
		if src != addrs[0] && src != addrs[1] {
			t.Errorf("the origin saw a request through the Service from %s, want only the replicas' %s and %s", src, addrs[0], addrs[1])
		}
	}
	return out
}

// update applies mutate to the Proxy, retrying on a conflict with the
// operator's writes.
func update(ctx context.Context, t *testing.T, k8s client.Client, key client.ObjectKey, mutate func(*v1alpha1.Proxy)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var p v1alpha1.Proxy
		if err := k8s.Get(ctx, key, &p); err != nil {
			return err
		}
		mutate(&p)
		return k8s.Update(ctx, &p)
	})
	if err != nil {
		t.Fatalf("update the Proxy: %v", err)
	}
}

// waitReplicas polls the Proxy every second until all its replicas answer,
// none on a VM of before (replica index → VM name) and none being
// replaced, logging each change of its replicas' state.
func waitReplicas(ctx context.Context, t *testing.T, k8s client.Client, key client.ObjectKey, before map[int32]string, limit time.Duration) *v1alpha1.Proxy {
	t.Helper()
	var p v1alpha1.Proxy
	start, last := time.Now(), ""
	within(t, limit, time.Second, "the replicas of "+key.String()+" answer on new VMs", func() (bool, string) {
		if err := k8s.Get(ctx, key, &p); err != nil {
			t.Fatalf("get the Proxy: %v", err)
		}
		s := p.Status
		var states []string
		done := s.ObservedGeneration == p.Generation && len(s.Replicas) == int(max(p.Spec.Replicas, 1)) &&
			s.ReadyReplicas == int32(len(s.Replicas))
		for _, r := range s.Replicas {
			name := ""
			if r.Instance != nil {
				name = r.Instance.Name
			}
			state := fmt.Sprintf("%d %s %s %s", r.Index, name, r.Reason, r.Address)
			if !r.Ready {
				state += " (" + r.Message + ")"
			}
			states = append(states, state)
			if r.Instance == nil || r.Replacement != nil || !r.Ready || (before != nil && before[r.Index] == name) {
				done = false
			}
		}
		if now := s.Ready + " [" + strings.Join(states, "; ") + "]"; now != last {
			t.Logf("+%s %s", since(start), now)
			last = now
		}
		return done, last
	})
	return &p
}

// replicaStatus returns replica k's entry of the Proxy's status.
func replicaStatus(p *v1alpha1.Proxy, k int32) v1alpha1.ReplicaStatus {
	for _, r := range p.Status.Replicas {
		if r.Index == k {
			return r
		}
	}
	return v1alpha1.ReplicaStatus{Index: k}
}
