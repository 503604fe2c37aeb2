package memprovider

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidateListsEveryProblem(t *testing.T) {
	err := Config{
		Regions:      []string{"ok", "Bad_Region", "ok"},
		MachineTypes: map[string]MachineType{"tiny": {CPUs: 0, MemoryMiB: 64}},
	}.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{
		"token: must be set",
		`regions[1] "Bad_Region"`,
		`regions[2] "ok": listed twice`,
		`machineTypes["tiny"]`,
		"images: at least one entry",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not report %q:\n%v", want, err)
		}
	}
}

func TestNewNeverDials(t *testing.T) {
	cloud, cfg := testSetup(t)
	if _, err := New(cfg, cloud); err != nil {
		t.Fatal(err)
	}
	if n := (Control{Cloud: cloud}).Calls(); n != 0 {
		t.Errorf("New made %d backend calls, want 0", n)
	}
}

// Each machine-type bound on its own, at its edge: a small machine is
// allowed, one CPU or one MiB less is not.
func TestConfigMachineTypeBounds(t *testing.T) {
	base := Config{Token: "t", Regions: []string{"r1"}, Images: map[string]string{"i": "img"}}
	for mt, ok := range map[MachineType]bool{
		{CPUs: 1, MemoryMiB: 256}: true,
		{CPUs: 0, MemoryMiB: 512}: false,
		{CPUs: 2, MemoryMiB: 255}: false,
	} {
		cfg := base
		cfg.MachineTypes = map[string]MachineType{"m": mt}
		if err := cfg.Validate(); (err == nil) != ok {
			t.Errorf("machine type %+v: Validate = %v, want accepted %v", mt, err, ok)
		}
	}
}

func TestConfigDefaultCallTimeout(t *testing.T) {
	if got := (Config{}).withDefaults().CallTimeout; got != 30*time.Second {
		t.Errorf("default call timeout %s, want 30s", got)
	}
	if got := (Config{CallTimeout: time.Second}).withDefaults().CallTimeout; got != time.Second {
		t.Errorf("a set call timeout became %s", got)
	}
}
