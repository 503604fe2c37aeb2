package memprovider

import (
	"context"
	"fmt"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

// The responses below are the Cloud's own (cloud.go), as the provider
// receives them; a real provider's table holds captured backend responses.
func TestClassify(t *testing.T) {
	const src = "memprovider/cloud.go"
	contracttest.RunClassifyTable(t, classify, []contracttest.ClassifyCase{
		{Name: "VM missing", Err: &APIError{404, "vm_not_found", `VM "a" does not exist`}, Want: contract.ErrNotFound, Source: src},
		{Name: "volume missing", Err: &APIError{404, "volume_not_found", `volume "a-seed" does not exist`}, Want: contract.ErrNotFound, Source: src},
		{Name: "quota", Err: &APIError{403, "quota_exceeded", "Quota exceeded for cores"}, Want: contract.ErrQuota, Source: src},
		{Name: "no capacity", Err: &APIError{507, "insufficient_capacity", "no host has room"}, Want: contract.ErrQuota, Source: src},
		{Name: "forbidden is not quota", Err: &APIError{403, "forbidden", "the token lacks the vm.create privilege"}, Want: contract.ErrPermanent, Source: src},
		{Name: "token rejected", Err: &APIError{401, "unauthorized", "the API token is invalid or expired"}, Want: contract.ErrPermanent, Source: src},
		{Name: "bad image", Err: &APIError{400, "invalid_image", `image "x" does not exist`}, Want: contract.ErrPermanent, Source: src},
		{Name: "locked", Err: &APIError{409, "locked", `VM "a" is locked (clone)`}, Want: nil, Source: src},
		{Name: "name taken", Err: &APIError{409, "name_taken", `a VM named "a" already exists`}, Want: nil, Source: src},
		{Name: "unavailable", Err: &APIError{503, "unavailable", "the service is temporarily unavailable"}, Want: nil, Source: src},
		{Name: "wrapped", Err: fmt.Errorf("memcloud GetVM: %w", &APIError{404, "vm_not_found", "gone"}), Want: contract.ErrNotFound, Source: src},
		{Name: "cancelled", Err: fmt.Errorf("memcloud GetVM: %w", context.Canceled), Want: nil, Source: "context package"},
	})
}
