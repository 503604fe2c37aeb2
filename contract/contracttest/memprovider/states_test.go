package memprovider

import (
	"fmt"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

func TestStateTable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		vm     VM
		want   contract.State
		wantIP string
	}{
		{"defined, never started", VM{Power: "defined"}, contract.StateProvisioning, ""},
		{"locked clone, never started", VM{Power: "defined", Lock: "clone"}, contract.StateProvisioning, ""},
		{"running without an address", VM{Power: "running", Started: true}, contract.StateProvisioning, ""},
		{"running with link-local only", VM{Power: "running", Started: true, IPs: []string{"169.254.1.1"}}, contract.StateProvisioning, ""},
		{"running with an address", VM{Power: "running", Started: true, IPs: []string{"fe80::1", "10.0.0.7"}}, contract.StateRunning, "10.0.0.7"},
		{"running, locked by a backup", VM{Power: "running", Started: true, Lock: "backup", IPs: []string{"10.0.0.7"}}, contract.StateRunning, "10.0.0.7"},
		{"stopped", VM{Power: "stopped", Started: true}, contract.StateStopped, ""},
		{"paused", VM{Power: "paused", Started: true}, contract.StateStopped, ""},
		{"unknown state", VM{Power: "hibernating", Started: true}, contract.StateStopped, ""},
		{"deleting", VM{Power: "running", Started: true, Deleting: true, IPs: []string{"10.0.0.7"}}, contract.StateTerminated, ""},
		{"deleting, never started", VM{Power: "defined", Deleting: true}, contract.StateTerminated, ""},
	} {
		state, ip := stateOf(tc.vm)
		if state != tc.want || ip != tc.wantIP {
			t.Errorf("%s: stateOf = %s %q, want %s %q", tc.name, state, ip, tc.want, tc.wantIP)
		}
	}
}

// The Cloud's egress pool hands out each host of 203.0.113.0/24 once, from
// .1 to .254, and then refuses.
func TestAddressPoolHandsOutEachHostOnce(t *testing.T) {
	r := &region{addresses: map[string]*Address{}}
	for i := 1; i <= 254; i++ {
		a, err := r.allocate("r1", nil)
		if want := fmt.Sprintf("203.0.113.%d", i); err != nil || a.IP != want {
			t.Fatalf("allocation %d = %q, %v; want %s", i, a.IP, err, want)
		}
	}
	if a, err := r.allocate("r1", nil); err == nil {
		t.Errorf("allocation 255 = %q; want the pool exhausted", a.IP)
	}
}
