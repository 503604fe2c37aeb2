//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// failedOver is what killReplica measured (docs/performance.md,
// "Failover"), each from the moment the VM was destroyed.
type failedOver struct {
	victim string // "replica k's VM <name> at <address>"
	killed time.Time
	// endpointGone is when the dead VM's address left the Service's ready
	// endpoints; replaced when the replica answered again on a new VM.
	endpointGone, replaced time.Duration
	// sent and failed count the client's requests from the kill (less the
	// client's timeout, for requests in flight at it) until the replica
	// answered again; lastFailure is when the last failed one ended.
	sent, failed int
	lastFailure  time.Duration
}

// killReplica destroys the VM of replica k of the Ready Proxy p from
// outside (virsh destroy: the guest is gone at once, as on a host crash),
// while the client Pod sends its requests through the Service, and
// measures how long the dead VM stays in the Service and until the
// replica answers again on a new VM.
func killReplica(t *testing.T, k8s client.Client, cs kubernetes.Interface, l lane, p *v1alpha1.Proxy, k int32) failedOver {
	t.Helper()
	ctx := t.Context()
	victim := replicaStatus(p, k)
	if victim.Instance == nil || !victim.Ready {
		t.Fatalf("replica %d of %s is not serving: %+v", k, p.Name, victim)
	}
	// A moment after the replica's last check: a kill right after one
	// would be found by the next resync at once and show nothing of the
	// wait between checks.
	time.Sleep(killAfter)
	// The replacement may reuse the name (a replica's VM made again after
	// it stopped keeps it): a new VM is a new domain UUID.
	uuid := strings.TrimSpace(virsh(t, l, "domuuid", victim.Instance.Name))
	out := failedOver{victim: fmt.Sprintf("replica %d's VM %s at %s", k, victim.Instance.Name, victim.Address), killed: time.Now()}
	virsh(t, l, "destroy", victim.Instance.Name)
	within(t, 5*time.Minute, 100*time.Millisecond, "the dead VM's address "+victim.Address+" leaves the Service", func() (bool, string) {
		listed := readyEndpoints(ctx, t, cs, p)
		return !slices.Contains(listed, victim.Address), fmt.Sprintf("ready endpoints %v", listed)
	})
	out.endpointGone = since(out.killed)
	var back v1alpha1.ReplicaStatus
	within(t, 15*time.Minute, time.Second, fmt.Sprintf("replica %d answers again", k), func() (bool, string) {
		var now v1alpha1.Proxy
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), &now); err != nil {
			t.Fatalf("get the Proxy: %v", err)
		}
		back = replicaStatus(&now, k)
		return back.Ready && back.Instance != nil && slices.Contains(readyEndpoints(ctx, t, cs, p), back.Address),
			fmt.Sprintf("replica %d: %s %s", k, back.Reason, back.Message)
	})
	out.replaced = since(out.killed)
	if now := strings.TrimSpace(virsh(t, l, "domuuid", back.Instance.Name)); now == uuid {
		t.Fatalf("replica %d is Ready again on the destroyed domain %s (%s)", k, back.Instance.Name, uuid)
	}
	t.Logf("replica %d's VM %s destroyed: its address %s left the Service after %s; the replica answered again on a new VM after %s",
		k, victim.Instance.Name, victim.Address, out.endpointGone.Round(time.Millisecond), out.replaced.Round(time.Millisecond))
	return out
}

// timeline is what the lane saw of the failover, as lines with their
// times to the nanosecond, beside the operator's log in failover.log.
func (f failedOver) timeline() []string {
	at := func(d time.Duration) string { return f.killed.Add(d).UTC().Format(time.RFC3339Nano) }
	return []string{
		fmt.Sprintf("%s virsh destroy of %s", at(0), f.victim),
		fmt.Sprintf("%s its address seen gone from the Service's ready endpoints (+%s; polled every 100 ms)", at(f.endpointGone), f.endpointGone.Round(time.Millisecond)),
		fmt.Sprintf("%s the replica seen answering again on a new VM (+%s; polled every second)", at(f.replaced), f.replaced.Round(time.Millisecond)),
	}
}

// around picks from the operator's log (kubectl logs --prefix, JSON lines)
// the lines from a second before the kill until a second after the dead
// VM left the Service, each as its time and message, the Proxy and
// replica fields kept: where the seconds between went.
func (f failedOver) around(log string) []string {
	return logBetween(log, f.killed.Add(-time.Second), f.killed.Add(f.endpointGone+time.Second))
}

// logBetween picks the operator's log lines (saveOperatorLogs's) from
// from to to, each as its time, message and the fields that say which
// replica, VM and address it is about.
func logBetween(log string, from, to time.Time) []string {
	var out []string
	for line := range strings.Lines(log) {
		_, doc, ok := strings.Cut(line, "] ")
		var entry map[string]any
		if !ok || json.Unmarshal([]byte(doc), &entry) != nil {
			continue
		}
		ts, _ := entry["ts"].(string)
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || at.Before(from) || at.After(to) {
			continue
		}
		fields := []string{ts, fmt.Sprint(entry["msg"])}
		for _, k := range []string{"replica", "instance", "address", "providerID", "reason", "failures", "error", "state"} {
			if v, ok := entry[k]; ok {
				fields = append(fields, fmt.Sprintf("%s=%v", k, v))
			}
		}
		out = append(out, strings.Join(fields, " "))
	}
	return out
}

// readyEndpoints lists the addresses the Proxy's EndpointSlices offer as
// ready.
func readyEndpoints(ctx context.Context, t *testing.T, cs kubernetes.Interface, p *v1alpha1.Proxy) []string {
	t.Helper()
	eps, err := cs.DiscoveryV1().EndpointSlices(p.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + p.Name})
	if err != nil {
		t.Fatalf("list the EndpointSlices of %s: %v", p.Name, err)
	}
	var out []string
	for _, s := range eps.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				out = append(out, e.Addresses...)
			}
		}
	}
	return out
}

// killAfter is how long after the replicas answer the VM is killed.
const killAfter = 10 * time.Second

// clientTimeout is the client Pod's timeout per request (probe loop).
const clientTimeout = 5 * time.Second

// count sorts one line of the client Pod's log ("<start> ok|fail <took>
// …") into the failover's window or the rest; it reports whether the line
// is in the window.
func (f *failedOver) count(line string) (inWindow bool) {
	at, rest, _ := strings.Cut(line, " ")
	start, err := time.Parse(time.RFC3339Nano, at)
	if err != nil || start.Before(f.killed.Add(-clientTimeout)) || start.After(f.killed.Add(f.replaced)) {
		return false
	}
	f.sent++
	if strings.HasPrefix(rest, "ok ") {
		return true
	}
	f.failed++
	took := clientTimeout
	if fields := strings.Fields(rest); len(fields) > 1 {
		if d, err := time.ParseDuration(fields[1]); err == nil {
			took = d
		}
	}
	f.lastFailure = max(f.lastFailure, start.Add(took).Sub(f.killed))
	return true
}
