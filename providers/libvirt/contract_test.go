package libvirt

import (
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

// TestContract runs the conformance harness against the provider on two
// test driver instances, test:///default and a second one read from a
// node file (see testdriver_test.go for what the control does).
func TestContract(t *testing.T) {
	b := newTestBackend(t)
	contracttest.Run(t, contracttest.Config{
		NewProvider:      func(t *testing.T) contract.Provider { return b.provider(t) },
		Backend:          control{b},
		Placement:        contract.Placement{Region: testRegion, MachineType: "small", Image: "debian-12"},
		OtherPlacements:  []contract.Placement{{Region: otherRegion, MachineType: "small", Image: "debian-12"}},
		MaxCloudInit:     maxCloudInit,
		IgnoredPlacement: []string{"Zone"},
		Credential:       b.credential,
		CallBudget:       time.Second,
		WaitTimeout:      10 * time.Second,
		StaticNetwork:    &testNetwork,
	})
}
