package contract_test

import (
	"errors"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

func TestLookup(t *testing.T) {
	sizes := map[string]int{"small": 1, "large": 4}
	if v, err := contract.Lookup("placement.machineType", sizes, "large"); err != nil || v != 4 {
		t.Fatalf("Lookup(large) = %d, %v", v, err)
	}
	_, err := contract.Lookup("placement.machineType", sizes, "huge")
	if !errors.Is(err, contract.ErrPermanent) || err.Error() != `placement.machineType "huge": not one of: large, small` {
		t.Errorf("Lookup(huge) = %v", err)
	}
}
