package contracttest

import (
	"testing"
)

func TestRequireEnvReturnsTheVariables(t *testing.T) {
	t.Setenv("CT_TEST_SERVER", "https://vc.example")
	vars := RequireEnv(t, "real backend", "CT_TEST_", []string{"SERVER"})
	if vars["SERVER"] != "https://vc.example" {
		t.Errorf("RequireEnv = %v", vars)
	}
}

func TestRequireEnvSkipsNamingWhatIsMissing(t *testing.T) {
	t.Setenv("CT_TEST_SERVER", "https://vc.example")
	t.Setenv("CT_TEST_USER", "")
	t.Setenv("CT_TEST_PASSWORD", "")
	_, msg := readEnv("real vCenter", "CT_TEST_", []string{"SERVER", "USER", "PASSWORD"}, []string{"CT_TEST_CA_FILE"})
	want := "skipped: no real vCenter; set CT_TEST_USER, CT_TEST_PASSWORD (and optionally CT_TEST_CA_FILE)"
	if msg != want {
		t.Errorf("skip message %q, want %q", msg, want)
	}
	var skipped bool
	t.Run("inner", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		RequireEnv(t, "real vCenter", "CT_TEST_", []string{"SERVER", "USER"})
		t.Error("RequireEnv went on without CT_TEST_USER")
	})
	if !skipped {
		t.Error("the test was not skipped")
	}
}
