package proxmox

import (
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

// TestContract runs the conformance harness against the provider on the
// fake PVE API. The control implements every capability, so no rule is
// skipped for want of one.
func TestContract(t *testing.T) {
	f := startFake(t)
	contracttest.Run(t, contracttest.Config{
		NewProvider: func(t *testing.T) contract.Provider { return f.provider(t) },
		Backend:     control{f},
		Placement:   testPlacement,
		// Zone b: the second node.
		OtherPlacements: []contract.Placement{otherPlacement},
		// The NoCloud seed's limit (spec entry 5).
		MaxCloudInit: MaxCloudInit,
		Credential:   testSecret,
		CallBudget:   time.Second,
		WaitTimeout:  20 * time.Second,
	})
}
