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

func TestLookupZone(t *testing.T) {
	one := map[string]string{"c0": "pool-0"}
	if v, err := contract.LookupZone(one, ""); err != nil || v != "pool-0" {
		t.Errorf("LookupZone(one zone, \"\") = %q, %v; want the only zone", v, err)
	}
	two := map[string]string{"c0": "pool-0", "c1": "pool-1"}
	if v, err := contract.LookupZone(two, "c1"); err != nil || v != "pool-1" {
		t.Errorf("LookupZone(c1) = %q, %v", v, err)
	}
	_, err := contract.LookupZone(two, "")
	if !errors.Is(err, contract.ErrPermanent) || err.Error() != `placement.zone "": not one of: c0, c1` {
		t.Errorf("LookupZone(two zones, \"\") = %v, want a field error listing both", err)
	}
}

func TestCloudInitFits(t *testing.T) {
	if err := contract.CloudInitFits(make([]byte, 10), 10, "guestinfo"); err != nil {
		t.Errorf("10 bytes within 10: %v", err)
	}
	err := contract.CloudInitFits(make([]byte, 11), 10, "guestinfo")
	if !errors.Is(err, contract.ErrPermanent) || err.Error() != `cloudInit "11 bytes": at most 10 bytes through guestinfo` {
		t.Errorf("11 bytes within 10: %v", err)
	}
}

func TestLookupPlacement(t *testing.T) {
	regions := map[string]string{"r1": "dc1"}
	sizes := map[string]int{"small": 1}
	images := map[string]string{"debian-12": "tmpl"}
	r, m, i, err := contract.LookupPlacement(contract.Placement{Region: "r1", MachineType: "small", Image: "debian-12"}, regions, sizes, images)
	if err != nil || r != "dc1" || m != 1 || i != "tmpl" {
		t.Fatalf("LookupPlacement = %q, %d, %q, %v", r, m, i, err)
	}
	for field, pl := range map[string]contract.Placement{
		"placement.region":      {Region: "r9", MachineType: "small", Image: "debian-12"},
		"placement.machineType": {Region: "r1", MachineType: "huge", Image: "debian-12"},
		"placement.image":       {Region: "r1", MachineType: "small", Image: "arch"},
	} {
		_, _, _, err := contract.LookupPlacement(pl, regions, sizes, images)
		var fe *contract.FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("LookupPlacement(%+v) = %v, want a field error naming %s", pl, err, field)
		}
	}
}
