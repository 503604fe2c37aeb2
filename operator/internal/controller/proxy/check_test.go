package proxy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/images/cloudinit"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

const checkUID = "6f1c1b0e-0000-4000-8000-0000000000c1"

// scriptedVM is a provider of one VM whose Gets answer states in turn (the
// last one from then on); it records the Gets and Deletes.
type scriptedVM struct {
	contract.Provider
	states  []contract.State
	gets    int
	deletes int
}

func (s *scriptedVM) Get(context.Context, string) (contract.Instance, error) {
	st := s.states[min(s.gets, len(s.states)-1)]
	s.gets++
	return contract.Instance{ProviderID: "r1/vm", Name: "vm", State: st, IP: "192.0.2.10",
		UID: checkUID}, nil
}

func (s *scriptedVM) Delete(context.Context, string) error { s.deletes++; return nil }

// silentVM is a prober of a VM that never answers (a dead VM drops the
// connection, it does not refuse it): it waits for the probe's deadline,
// and records how long it was given.
type silentVM struct{ given time.Duration }

func (p *silentVM) Probe(ctx context.Context, _ string, _ int32, _ bool) (*cloudinit.Stats, error) {
	if d, ok := ctx.Deadline(); ok {
		p.given = time.Until(d)
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(time.Minute):
		return nil, errors.New("no deadline")
	}
}

// A serving VM of a Proxy of more than one replica is probed within
// servingProbeTimeout, and when it does not answer, asked for again: one
// that died while the probe ran is found down in the same operation, so
// its reconcile takes it out of the Service at once, not after the next
// probe; it is not deleted while it may still be in the Service. Otherwise
// the prober's own timeout holds and nothing is asked again, and a VM
// found stopped is deleted in the operation.
func TestCheckAsksAgainForAServingVMThatDoesNotAnswer(t *testing.T) {
	for _, tc := range []struct {
		name        string
		serving     bool
		states      []contract.State
		wantState   contract.State
		wantGets    int
		wantDeletes int
		wantProbed  bool
	}{
		{"serving, died during the probe", true, []contract.State{contract.StateRunning, contract.StateStopped}, contract.StateStopped, 2, 0, false},
		{"serving, found stopped", true, []contract.State{contract.StateStopped}, contract.StateStopped, 1, 0, false},
		{"not serving, found stopped", false, []contract.State{contract.StateStopped}, contract.StateStopped, 1, 1, false},
		{"serving, still running", true, []contract.State{contract.StateRunning}, contract.StateRunning, 2, 0, true},
		{"not serving", false, []contract.State{contract.StateRunning, contract.StateStopped}, contract.StateRunning, 1, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prov, prober := &scriptedVM{states: tc.states}, &silentVM{}
			r := &Reconciler{Prober: prober}
			// The prober's own timeout stands in for probe.HTTPProxy's 5 s.
			ctx, cancel := context.WithTimeout(context.Background(), 3*servingProbeTimeout)
			defer cancel()
			seen, err := r.check(ctx, prov, "r1/vm", sight{uid: checkUID, port: 3128, serving: tc.serving})
			if err != nil {
				t.Fatal(err)
			}
			if seen.inst.State != tc.wantState || prov.gets != tc.wantGets || prov.deletes != tc.wantDeletes || (seen.probed != nil) != tc.wantProbed {
				t.Errorf("state %s after %d Gets and %d Deletes, probe failed %v; want %s, %d, %d, %v",
					seen.inst.State, prov.gets, prov.deletes, seen.probed != nil, tc.wantState, tc.wantGets, tc.wantDeletes, tc.wantProbed)
			}
			if tc.serving && prober.given > servingProbeTimeout {
				t.Errorf("the probe of a serving VM was given %s, want at most %s", prober.given, servingProbeTimeout)
			}
		})
	}
}

// Only the serving VM of a replica beside others has its probe bounded by
// servingProbeTimeout and is left in place when found stopped: a lone
// replica has no other VM to take its clients, and a VM that does not
// serve yet may be slow to answer while it boots.
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
