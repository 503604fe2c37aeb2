package memprovider

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

const testToken = "sentinel-token-7c1d9e"

// testSetup is one Cloud and the Config the harness runs the provider with.
func testSetup(t *testing.T) (*Cloud, Config) {
	t.Helper()
	cloud := NewCloud(testToken, []string{"r1", "r2"}, []string{"debian-12-proxy"}, 30*time.Millisecond)
	cloud.SetLatency(time.Millisecond)
	cfg := Config{
		Token:        testToken,
		Regions:      []string{"r1", "r2"},
		MachineTypes: map[string]MachineType{"small": {CPUs: 1, MemoryMiB: 512}},
		Images:       map[string]string{"debian-12": "debian-12-proxy"},
		CallTimeout:  300 * time.Millisecond,
		Egress:       true,
	}
	return cloud, cfg
}

// harnessConfig wires any provider constructor over cloud into the harness.
func harnessConfig(cloud *Cloud, newProvider func(t *testing.T) contract.Provider) contracttest.Config {
	return contracttest.Config{
		NewProvider:     newProvider,
		Backend:         Control{Cloud: cloud},
		Placement:       contract.Placement{Region: "r2", MachineType: "small", Image: "debian-12"},
		OtherPlacements: []contract.Placement{{Region: "r1", MachineType: "small", Image: "debian-12"}},
		MaxCloudInit:    MaxVolumeBytes,
		Credential:      testToken,
		CallBudget:      300 * time.Millisecond,
		WaitTimeout:     5 * time.Second,
		StaticNetwork: &contract.StaticNetwork{
			Address: netip.MustParsePrefix("198.51.100.20/24"),
			Gateway: netip.MustParseAddr("198.51.100.1"),
			DNS:     []netip.Addr{netip.MustParseAddr("198.51.100.53")},
		},
	}
}

func TestContract(t *testing.T) {
	cloud, cfg := testSetup(t)
	contracttest.Run(t, harnessConfig(cloud, func(t *testing.T) contract.Provider {
		p, err := New(cfg, cloud)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}))
}

// Config.Rules runs the rules it names and no other: each rule makes its
// provider under its own subtest, whose name says which rule ran.
func TestContractRulesSubset(t *testing.T) {
	cloud, cfg := testSetup(t)
	want := []string{"GetAfterDelete", "EgressKeptPerReplica"}
	var mu sync.Mutex
	ran := map[string]bool{}
	hc := harnessConfig(cloud, func(t *testing.T) contract.Provider {
		mu.Lock()
		ran[strings.SplitN(t.Name(), "/", 3)[1]] = true
		mu.Unlock()
		p, err := New(cfg, cloud)
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
	hc.Rules = want
	contracttest.Run(t, hc)
	if got := slices.Sorted(maps.Keys(ran)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("the rules that ran = %v, want %v", got, want)
	}
}
