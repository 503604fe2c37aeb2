package libvirt

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/images/fetch"
)

func TestConfigValidateListsEveryProblem(t *testing.T) {
	err := Config{
		Regions: map[string]Region{
			"Host_1": {URI: "qemu:///system", Pool: "default", Network: "default"},
			"host-2": {URI: "qemu+ssh://root:hunter2@host2/system", Pool: "bad pool", Network: ""},
			"host-3": {URI: "no scheme", Pool: "p", Network: "n"},
		},
		DomainType:        "xen",
		Machine:           "PC;rm",
		MachineTypes:      map[string]MachineType{"tiny": {CPUs: 0, MemoryMiB: 128}},
		Images:            map[string]fetch.Entry{"img": {URL: "ftp://x/y", SHA256: "abc", Format: "qcow2"}},
		AddressSources:    []string{"lease", "arp", "lease"},
		SerialLogDir:      "relative/dir",
		KeepaliveInterval: contract.Duration{Duration: 1500 * time.Millisecond},
		KeepaliveCount:    101,
	}.Validate()
	if err == nil {
		t.Fatal("an invalid config was accepted")
	}
	for _, want := range []string{
		`regions["Host_1"]: a region key must match`,
		`regions["host-2"].uri "qemu+ssh://root:xxxxx@host2/system": carries a password`,
		`regions["host-2"].pool "bad pool"`,
		`regions["host-2"].network ""`,
		`regions["host-3"].uri "no scheme"`,
		`domainType "xen": one of auto, qemu, kvm`,
		`machine "PC;rm"`,
		`machineTypes["tiny"]: cpus 0, memoryMiB 128`,
		`images["img"].url "ftp://x/y"`,
		`addressSources[1] "arp"`,
		`addressSources[2] "lease"`,
		`serialLogDir "relative/dir"`,
		`keepaliveInterval 1.5s: want whole seconds from 1s to 10m`,
		`keepaliveCount 101: want 1 to 100`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not report %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the error shows the URI's password: %v", err)
	}
}

func TestConfigDefaults(t *testing.T) {
	var c Config
	if err := json.Unmarshal([]byte(`{"callTimeout": "45s"}`), &c); err != nil {
		t.Fatal(err)
	}
	c = c.withDefaults()
	if c.CallTimeout.Duration != 45*time.Second || c.ImageTimeout.Duration != 30*time.Minute || c.DomainType != "auto" ||
		c.KeepaliveInterval.Duration != 5*time.Second || c.KeepaliveCount != 3 ||
		c.Machine != "pc" || strings.Join(c.AddressSources, ",") != "lease,agent" {
		t.Errorf("defaults: %+v", c)
	}
	if err := json.Unmarshal([]byte(`{"callTimeout": 30}`), &c); err == nil {
		t.Error("a bare number was accepted as a duration")
	}
}

// New validates and returns without a call to the daemon (contract §7).
func TestNewNeverDials(t *testing.T) {
	b := newTestBackend(t)
	before := b.calls.Load()
	p := b.provider(t)
	if after := b.calls.Load(); after != before || len(p.conns) != 0 {
		t.Errorf("New made %d calls and holds %d connections", after-before, len(p.conns))
	}
	cfg := b.cfg
	cfg.Regions = map[string]Region{"dead": {URI: "qemu:///system?socket=/nonexistent/sock", Pool: "p", Network: "n"}}
	if _, err := New(cfg); err != nil {
		t.Errorf("New with an unreachable daemon: %v", err)
	}
}
