package libvirt

import (
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

// TestContract runs the conformance harness against the provider on
// test:///default (see testdriver_test.go for what the control does).
// Skipped, each naming its capability: StateInjector (libvirt's domain
// state is a closed enum the test driver cannot leave; the state table
// test covers the unknown-state row), Locker (the test driver takes no
// job lock a test can hold), DeleteStarter (undefine is synchronous: there
// is no deleting state), CredentialRejecter and Config.Credential
// (test:///default has no authentication; the credentials are the
// transport's, never in the provider's hands).
func TestContract(t *testing.T) {
	b := newTestBackend(t)
	contracttest.Run(t, contracttest.Config{
		NewProvider:      func(t *testing.T) contract.Provider { return b.provider(t) },
		Backend:          control{b},
		Placement:        contract.Placement{Region: testRegion, MachineType: "small", Image: "debian-12"},
		IgnoredPlacement: []string{"Zone"},
		CallBudget:       time.Second,
		WaitTimeout:      10 * time.Second,
	})
}
