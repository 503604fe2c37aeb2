package vsphere

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

func soapClient(u *url.URL) *soap.Client { return soap.NewClient(u, true) }

func loginClient(ctx context.Context, c *vim25.Client, u *url.URL) error {
	return session.NewManager(c).Login(ctx, u.User)
}

// TestContract runs the conformance harness against the provider on vcsim,
// with one region per vcsim datacenter. The control implements every
// capability; vcsim plays each on its own objects (vcsim_test.go).
func TestContract(t *testing.T) {
	v := startVcsim(t)
	contracttest.Run(t, contracttest.Config{
		NewProvider:     func(t *testing.T) contract.Provider { return v.provider(t) },
		Backend:         control{v},
		Placement:       contract.Placement{Region: "dc0", Zone: "c0", MachineType: "small", Image: "debian-12"},
		OtherPlacements: []contract.Placement{{Region: "dc1", Zone: "c0", MachineType: "small", Image: "debian-12"}},
		MaxCloudInit:    MaxCloudInit,
		// Any address: vcsim gives none, the control reports it.
		StaticNetwork: staticNetwork(20),
		Credential:    testPassword,
		CallBudget:    time.Second,
		WaitTimeout:   20 * time.Second,
	})
}
