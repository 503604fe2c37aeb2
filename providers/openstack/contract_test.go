package openstack

import (
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
	"github.com/egress-proxies/egress-proxies-operator/providers/openstack/osfake"
)

// TestContract runs the conformance harness against the provider on the
// fake cloud. The fake holds every build until the control reports the
// server's address, so "not yet built" lasts as long as a rule needs it;
// deletes take 20 ms, so Get sees task_state deleting on the way out.
func TestContract(t *testing.T) {
	runContract(t, startCloud(t, func(o *osfake.Options) { o.HoldBuilds, o.DeleteDelay = true, 20*time.Millisecond }))
}

// TestContractWithOptions runs the harness again with every option of
// options.go on in both regions: a config drive, the managed security
// group, a server group per Proxy. Nothing the harness asks may change
// with them, and its inventory counts the server groups, so one left
// behind by a Delete or a refused Create fails it.
func TestContractWithOptions(t *testing.T) {
	c := startCloud(t, func(o *osfake.Options) { o.HoldBuilds, o.DeleteDelay = true, 20*time.Millisecond })
	c.withOptions()
	runContract(t, c)
}

// runContract runs the harness on the fake cloud c: region one's zone
// az2, with the other region and region one's other zone as the other
// placements.
func runContract(t *testing.T, c *cloud, adjust ...func(*contracttest.Config)) {
	cfg := contracttest.Config{
		NewProvider: func(t *testing.T) contract.Provider { return c.provider(t) },
		Backend:     control{c},
		Placement:   contract.Placement{Region: "one", Zone: "az2", MachineType: "small", Image: "debian-12"},
		OtherPlacements: []contract.Placement{
			{Region: "two", Zone: "az1", MachineType: "small", Image: "debian-12"},
			{Region: "one", Zone: "az1", MachineType: "small", Image: "debian-12"},
		},
		MaxCloudInit: MaxCloudInit,
		Credential:   testAppCredSecret,
		// A free address of the fake network's static subnet (and, for the
		// rule's second instance, the next one).
		StaticNetwork:      testNetwork("10.0.0.200/24"),
		NetworkFromBackend: true,
		CallBudget:         time.Second,
		WaitTimeout:        20 * time.Second,
	}
	for _, a := range adjust {
		a(&cfg)
	}
	contracttest.Run(t, cfg)
}

// TestContractWithFloatingIPs runs the harness with a floating IP per
// replica in both regions (floatingips.go): EgressKeptPerReplica runs,
// and every other rule must hold with a port and a floating IP made
// before each server, each call of them cut in turn.
func TestContractWithFloatingIPs(t *testing.T) {
	external := "5b3c3a52-4c5e-4c44-9a5c-7b0e2d6f9a10"
	c := startCloud(t, func(o *osfake.Options) {
		o.HoldBuilds, o.DeleteDelay = true, 20*time.Millisecond
		o.External = &osfake.ExternalNetwork{ID: external, CIDR: "203.0.113.0/24"}
	})
	for k, r := range c.cfg.Regions {
		r.FloatingIPs = &FloatingIPs{Network: external}
		c.cfg.Regions[k] = r
	}
	// Every server boots on a port of the provider's, whose address
	// Neutron gives when it is made (ip-source: assigned-at-create).
	runContract(t, c, func(cfg *contracttest.Config) { cfg.IPAssignedAtCreate = true })
}

// TestContractWithSoftDelete runs the harness on a cloud with soft delete
// (reclaim_instance_interval an hour): a deleted server that has run stays
// SOFT_DELETED, listed with its marks, until forced.
func TestContractWithSoftDelete(t *testing.T) {
	runContract(t, startCloud(t, func(o *osfake.Options) {
		o.HoldBuilds, o.DeleteDelay, o.ReclaimInstanceInterval = true, 20*time.Millisecond, time.Hour
	}))
}
