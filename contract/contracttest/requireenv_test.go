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
	t.Setenv("CT_TEST_SERVER", "")
	var skipped bool
	t.Run("inner", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		RequireEnv(t, "real backend", "CT_TEST_", []string{"SERVER"}, "CT_TEST_CA_FILE")
		t.Error("RequireEnv went on without CT_TEST_SERVER")
	})
	if !skipped {
		t.Error("the test was not skipped")
	}
}
