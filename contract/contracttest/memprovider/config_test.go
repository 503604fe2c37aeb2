package memprovider

import (
	"strings"
	"testing"
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
