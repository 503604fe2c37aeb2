package contract_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// sdkError stands for a backend SDK's own error type.
type sdkError struct{ code int }

func (e *sdkError) Error() string { return fmt.Sprintf("sdk: code %d", e.code) }

func TestWrapKeepsClassAndSDKError(t *testing.T) {
	for _, tc := range []struct {
		wrap func(error) error
		want contract.Class
		is   error
	}{
		{contract.NotFound, contract.ClassNotFound, contract.ErrNotFound},
		{contract.Quota, contract.ClassQuota, contract.ErrQuota},
		{contract.Permanent, contract.ClassPermanent, contract.ErrPermanent},
	} {
		t.Run(string(tc.want), func(t *testing.T) {
			sdk := &sdkError{code: 404}
			err := fmt.Errorf("get vm-1: %w", tc.wrap(sdk))
			if got := contract.ClassOf(err); got != tc.want {
				t.Errorf("ClassOf = %q, want %q", got, tc.want)
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.is)
			}
			var target *sdkError
			if !errors.As(err, &target) || target.code != 404 {
				t.Errorf("errors.As did not reach the SDK error: %v", err)
			}
			if err.Error() != "get vm-1: sdk: code 404" {
				t.Errorf("text changed: %q", err.Error())
			}
		})
	}
}

func TestWrapLeavesFirstClassAlone(t *testing.T) {
	err := contract.Permanent(contract.NotFound(errors.New("gone")))
	if got := contract.ClassOf(err); got != contract.ClassNotFound {
		t.Errorf("ClassOf = %q, want NotFound (the first classification wins)", got)
	}
	if errors.Is(err, contract.ErrPermanent) {
		t.Error("a second Wrap added a second class")
	}
}

func TestContextErrorsStayTransient(t *testing.T) {
	for _, cause := range []error{context.Canceled, context.DeadlineExceeded} {
		err := contract.Permanent(fmt.Errorf("clone: %w", cause))
		if got := contract.ClassOf(err); got != contract.ClassTransient {
			t.Errorf("ClassOf(Permanent(%v)) = %q, want Transient", cause, got)
		}
		if errors.Is(err, contract.ErrPermanent) {
			t.Errorf("Wrap classified a context error as permanent: %v", err)
		}
		if !errors.Is(err, cause) {
			t.Errorf("lost the context error: %v", err)
		}
	}
}

func TestClassOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want contract.Class
	}{
		{nil, contract.ClassNone},
		{errors.New("connection reset"), contract.ClassTransient},
		{contract.ErrPartialList, contract.ClassTransient},
		{fmt.Errorf("x: %w", contract.ErrQuota), contract.ClassQuota},
	} {
		if got := contract.ClassOf(tc.err); got != tc.want {
			t.Errorf("ClassOf(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestInvalidFieldNamesFieldAndValue(t *testing.T) {
	err := contract.InvalidField("placement.machineType", "huge", "not in the catalogue (small, medium)")
	want := `placement.machineType "huge": not in the catalogue (small, medium)`
	if err.Error() != want {
		t.Errorf("got %q, want %q", err.Error(), want)
	}
	var fe *contract.FieldError
	if !errors.As(err, &fe) || fe.Field != "placement.machineType" || !errors.Is(err, contract.ErrPermanent) {
		t.Errorf("not a permanent FieldError: %#v", err)
	}
}
