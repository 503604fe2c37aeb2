package contract_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

func TestCreateRequestValidate(t *testing.T) {
	good := contract.CreateRequest{Name: "proxy-a-1f2e", UID: "0b7f8e7e-5a0c-4c43-9d2e-6f0e2b1a7c55", Owner: "c0ffee12-lab", Port: 3128}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid request rejected: %v", err)
	}
	for _, tc := range []struct {
		mutate    func(*contract.CreateRequest)
		field, in string
	}{
		{func(r *contract.CreateRequest) { r.Name = "Proxy_A" }, "name", "Proxy_A"},
		{func(r *contract.CreateRequest) { r.Name = strings.Repeat("a", 64) }, "name", strings.Repeat("a", 64)},
		{func(r *contract.CreateRequest) { r.UID = "" }, "uid", `""`},
		{func(r *contract.CreateRequest) { r.Owner = "" }, "owner", `""`},
		{func(r *contract.CreateRequest) { r.Owner = "prod.lab" }, "owner", `"prod.lab"`},
		{func(r *contract.CreateRequest) { r.Owner = contract.LegacyManagedValue }, "owner", `"true"`},
		{func(r *contract.CreateRequest) { r.Port = 0 }, "port", `"0"`},
		{func(r *contract.CreateRequest) { r.Port = 70000 }, "port", `"70000"`},
		{func(r *contract.CreateRequest) { r.Replica = -1 }, "replica", `"-1"`},
		{func(r *contract.CreateRequest) { r.Replica = contract.MaxReplica + 1 }, "replica", `"256"`},
	} {
		req := good
		tc.mutate(&req)
		err := req.Validate()
		var fe *contract.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, contract.ErrPermanent) {
			t.Errorf("want a permanent FieldError for %s, got %v", tc.field, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.in) {
			t.Errorf("error %q does not name the value %s", err, tc.in)
		}
	}
}

func TestReplicaBounds(t *testing.T) {
	good := contract.CreateRequest{Name: "proxy-a-1f2e", UID: "0b7f8e7e-5a0c-4c43-9d2e-6f0e2b1a7c55", Owner: "c0ffee12-lab", Port: 3128}
	for _, replica := range []int32{0, 1, contract.MaxReplica} {
		req := good
		req.Replica = replica
		if err := req.Validate(); err != nil {
			t.Errorf("replica %d refused: %v", replica, err)
		}
		if err := (contract.Egress{UID: good.UID, Replica: replica}).Validate(); err != nil {
			t.Errorf("Egress replica %d refused: %v", replica, err)
		}
	}
	for _, e := range []contract.Egress{
		{UID: "", Replica: 0},
		{UID: "Not_A_Label", Replica: 0},
		{UID: good.UID, Replica: -1},
		{UID: good.UID, Replica: contract.MaxReplica + 1},
	} {
		err := e.Validate()
		var fe *contract.FieldError
		if !errors.As(err, &fe) || !errors.Is(err, contract.ErrPermanent) {
			t.Errorf("Egress%+v.Validate() = %v, want a permanent FieldError", e, err)
		}
	}
}
