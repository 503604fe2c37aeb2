package proxmox

import (
	"fmt"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
	"github.com/egress-proxies/egress-proxies-operator/providers/proxmox/pvefake"
)

// TestContract runs the conformance harness against the provider on the
// fake PVE API, once per pinned PVE version (its schema and privileges),
// the token holding exactly the role docs/proxmox-provider.md documents.
// The control implements every capability, so no rule is skipped for want
// of one.
func TestContract(t *testing.T) {
	for _, version := range []int{8, 9} {
		t.Run(fmt.Sprintf("pve%d", version), func(t *testing.T) {
			// Not parallel: the harness's 1 s call budget holds under
			// -race on a 2-CPU machine with one fake at a time; two at
			// once failed a 16 MiB seed upload there by its deadline.
			f := startFakeOpts(t, func(o *pvefake.Options) { o.Version = version })
			contracttest.Run(t, contracttest.Config{
				NewProvider: func(t *testing.T) contract.Provider { return f.provider(t) },
				Backend:     control{f},
				Placement:   testPlacement,
				// Zone b: the second node.
				OtherPlacements: []contract.Placement{otherPlacement},
				// The NoCloud seed's limit (spec entry 5).
				MaxCloudInit: MaxCloudInit,
				Credential:   testSecret,
				// Any address: the fake's guest is what the control says
				// (ReportIP); the seed's network-config and ipconfig0
				// carry it (DeliveredNetwork).
				StaticNetwork: testNetwork(10),
				CallBudget:    time.Second,
				WaitTimeout:   20 * time.Second,
			})
		})
	}
}
