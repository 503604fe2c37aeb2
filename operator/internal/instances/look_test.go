package instances

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/images/cloudinit"
)

const checkUID = "6f1c1b0e-0000-4000-8000-0000000000c1"

// scriptedVM is a provider of one VM whose Gets answer states in turn (the
// last one from then on), carrying the UID uid; it records the Gets and
// Deletes.
type scriptedVM struct {
	contract.Provider
	states  []contract.State
	uid     string
	gets    int
	deletes int
}

func (s *scriptedVM) Get(context.Context, string) (contract.Instance, error) {
	st := s.states[min(s.gets, len(s.states)-1)]
	s.gets++
	return contract.Instance{ProviderID: "r1/vm", Name: "vm", State: st, IP: "192.0.2.10", UID: s.uid}, nil
}

func (s *scriptedVM) Delete(context.Context, string) error { s.deletes++; return nil }

// silentVM is a prober of a VM that never answers (a dead VM drops the
// connection, it does not refuse it): it waits for the probe's deadline,
// and records how many probes it had and how long the last was given.
type silentVM struct {
	probes int
	given  time.Duration
}

func (p *silentVM) Probe(ctx context.Context, _ string, _ int32, _ bool) (*cloudinit.Stats, error) {
	p.probes++
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
// ServingProbeTimeout, and when it does not answer, asked for again: one
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
			prov, prober := &scriptedVM{states: tc.states, uid: checkUID}, &silentVM{}
			// The prober's own timeout stands in for probe.HTTPProxy's 5 s.
			ctx, cancel := context.WithTimeout(context.Background(), 3*ServingProbeTimeout)
			defer cancel()
			seen, err := Check(ctx, prov, "r1/vm", Sight{Prober: prober, UID: checkUID, Port: 3128, Serving: tc.serving})
			if err != nil {
				t.Fatal(err)
			}
			if seen.Inst.State != tc.wantState || prov.gets != tc.wantGets || prov.deletes != tc.wantDeletes || (seen.Probed != nil) != tc.wantProbed {
				t.Errorf("state %s after %d Gets and %d Deletes, probe failed %v; want %s, %d, %d, %v",
					seen.Inst.State, prov.gets, prov.deletes, seen.Probed != nil, tc.wantState, tc.wantGets, tc.wantDeletes, tc.wantProbed)
			}
			if tc.serving && prober.given > ServingProbeTimeout {
				t.Errorf("the probe of a serving VM was given %s, want at most %s", prober.given, ServingProbeTimeout)
			}
		})
	}
}

// An instance that does not carry the Proxy's UID is neither probed nor
// deleted, whatever its state: a backend that reused a name or an ID
// answers with another Proxy's VM.
func TestLookLeavesAnotherProxysInstance(t *testing.T) {
	for _, state := range []contract.State{contract.StateRunning, contract.StateStopped, contract.StateTerminated} {
		prov, prober := &scriptedVM{states: []contract.State{state}, uid: "6f1c1b0e-0000-4000-8000-0000000000c2"}, &silentVM{}
		inst, err := prov.Get(context.Background(), "r1/vm")
		if err != nil {
			t.Fatal(err)
		}
		seen := Look(context.Background(), prov, inst, Sight{Prober: prober, UID: checkUID, Port: 3128})
		if prober.probes != 0 || prov.deletes != 0 || seen.Deleted || seen.Probed != nil {
			t.Errorf("%s instance of another Proxy: %d probes, %d Deletes, deleted %v, probe failed %v; want none",
				state, prober.probes, prov.deletes, seen.Deleted, seen.Probed)
		}
	}
}
