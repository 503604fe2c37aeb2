package proxmox

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

func TestConfigValidateListsEveryProblem(t *testing.T) {
	err := Config{
		Regions: map[string]Region{
			"EU_1": {Endpoint: "http://pve1.example:8006", TokenIDFile: "/id", CAFile: "/ca.pem", InsecureSkipTLSVerify: true,
				VMIDs: VMIDRange{Min: 50, Max: 40},
				Zones: map[string]Zone{"z1": {Node: "pve 1", ISOStorage: "local;rm", Storage: "9bad"}}},
			"eu-2": {Endpoint: "https://pve2.example:8006/api2/json", TokenIDFile: "/id", TokenSecretFile: "/secret"},
		},
		MachineTypes: map[string]MachineType{"tiny": {Cores: 0, MemoryMiB: 128}},
		Images: map[string]Image{
			"both": {TemplateVMID: 9000, TemplateName: "debian"}, "low": {TemplateVMID: 42}, "bad-name": {TemplateName: "deb ian"},
		},
	}.Validate()
	if err == nil {
		t.Fatal("an invalid config was accepted")
	}
	for _, want := range []string{
		`regions["EU_1"]: a region key must match`,
		`regions["EU_1"].endpoint "http://pve1.example:8006": want the API root as an https URL`,
		`regions["EU_1"].tokenIDFile and tokenSecretFile: both are required`,
		`regions["EU_1"].caFile and insecureSkipTLSVerify: set one, not both`,
		`regions["EU_1"].vmids 50-40`,
		`regions["EU_1"].zones["z1"].node "pve 1"`,
		`regions["EU_1"].zones["z1"].isoStorage "local;rm"`,
		`regions["EU_1"].zones["z1"].storage "9bad"`,
		`regions["eu-2"].endpoint "https://pve2.example:8006/api2/json"`,
		`regions["eu-2"].zones: at least one is required`,
		`machineTypes["tiny"]: cores 0, memoryMiB 128`,
		`images["both"]: set exactly one of templateVMID and templateName`,
		`images["low"].templateVMID 42`,
		`images["bad-name"].templateName "deb ian"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not report %q:\n%v", want, err)
		}
	}
}

func TestConfigFullCloneNeedsStorage(t *testing.T) {
	f := startFake(t)
	cfg := f.cfg
	cfg.FullClone = true
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `zones["a"].storage: required with fullClone`) {
		t.Errorf("fullClone without a zone storage: %v", err)
	}
}

func TestConfigDecodesDurations(t *testing.T) {
	var c Config
	if err := json.Unmarshal([]byte(`{"callTimeout": "45s", "taskTimeout": "15m"}`), &c); err != nil {
		t.Fatal(err)
	}
	if c.CallTimeout.Duration != 45*time.Second || c.TaskTimeout.Duration != 15*time.Minute {
		t.Errorf("decoded %v %v", c.CallTimeout, c.TaskTimeout)
	}
	if err := json.Unmarshal([]byte(`{"callTimeout": 30}`), &c); err == nil {
		t.Error("a bare number was accepted as a duration")
	}
}

func TestConfigDefaults(t *testing.T) {
	f := startFake(t)
	cfg := f.cfg
	r := cfg.Regions[testRegion]
	r.VMIDs = VMIDRange{}
	cfg.Regions = map[string]Region{testRegion: r}
	cfg.CallTimeout, cfg.TaskTimeout = contract.Duration{}, contract.Duration{}
	d := cfg.withDefaults()
	if d.Regions[testRegion].VMIDs != (VMIDRange{Min: 100000, Max: 199999}) || d.CallTimeout.Duration != 30*time.Second || d.TaskTimeout.Duration != 10*time.Minute {
		t.Errorf("defaults: %+v %v %v", d.Regions[testRegion].VMIDs, d.CallTimeout, d.TaskTimeout)
	}
}

// The clone and network options: each problem named with its field and
// value, before any call; a config without them is as valid as before.
func TestConfigValidateCloneAndNetwork(t *testing.T) {
	f := startFake(t)
	full, linked := true, false
	cfg := f.cfg
	cfg.FullClone = true
	r := cfg.Regions[testRegion]
	r.Pool = "a/b/c/d"
	r.Zones = map[string]Zone{
		"a": {Node: "pve1", ISOStorage: "local", Storage: "local-lvm", Format: "qcow3", Pool: "bad pool",
			Network: &Network{Bridge: "vmbr 1", VLAN: 4095, MTU: 100}},
		"b": {Node: "pve2", ISOStorage: "local", FullClone: &linked, Format: "qcow2", Network: &Network{VLAN: -1, MTU: 65521}},
		"c": {Node: "pve2", ISOStorage: "local", FullClone: &full},
	}
	cfg.Regions = map[string]Region{testRegion: r}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("an invalid config was accepted")
	}
	for _, want := range []string{
		`regions["lab"].pool "a/b/c/d": want a pool ID`,
		`regions["lab"].zones["a"].format "qcow3": want one of raw, qcow2, vmdk`,
		`regions["lab"].zones["a"].pool "bad pool": want a pool ID`,
		`regions["lab"].zones["a"].network.bridge "vmbr 1": want a bridge name`,
		`regions["lab"].zones["a"].network.vlan 4095: want 1 to 4094`,
		`regions["lab"].zones["a"].network.mtu 100: want 1 (the bridge's) or 576 to 65520`,
		`regions["lab"].zones["b"].format "qcow2": for full clones only`,
		`regions["lab"].zones["b"].network.bridge "": want a bridge name`,
		`regions["lab"].zones["b"].network.vlan -1: want 1 to 4094`,
		`regions["lab"].zones["b"].network.mtu 65521`,
		`regions["lab"].zones["c"].storage: required with fullClone`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not report %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), `zones["b"].storage`) {
		t.Errorf("zone b is linked (its own fullClone: false) and needs no storage:\n%v", err)
	}

	ok := f.cfg
	r = ok.Regions[testRegion]
	r.Pool = "egress/proxies"
	r.Zones = map[string]Zone{"a": {Node: "pve1", ISOStorage: "local", Storage: "local-lvm", FullClone: &full, Format: "qcow2", Pool: "egress",
		Network: &Network{Bridge: "vmbr0.100", VLAN: 4094, MTU: 1}}}
	ok.Regions = map[string]Region{testRegion: r}
	if err := ok.Validate(); err != nil {
		t.Errorf("a valid config with every option: %v", err)
	}
}
