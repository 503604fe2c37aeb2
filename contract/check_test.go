package contract_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

func TestResultFromError(t *testing.T) {
	for _, tc := range []struct {
		err    error
		ok     bool
		reason string
	}{
		{nil, true, contract.ReasonOK},
		{fmt.Errorf("list: %w", context.DeadlineExceeded), false, contract.ReasonTimeout},
		{contract.NotFound(errors.New("datacenter DC9")), false, contract.ReasonNotFound},
		{contract.Quota(errors.New("no space")), false, contract.ReasonQuotaExceeded},
		{errors.New("boom"), false, contract.ReasonBackendError},
		// A credential file not mounted (yet): the admin's fix is the
		// Secret, as for a credential the backend refuses.
		{fmt.Errorf("login: %w", &contract.CredentialError{Path: "/etc/x/token"}), false, contract.ReasonUnauthenticated},
	} {
		r := contract.ResultFromError("region/a", tc.err)
		if r.OK != tc.ok || r.Reason != tc.reason || r.Target != "region/a" {
			t.Errorf("ResultFromError(%v) = %+v, want ok=%v reason=%s", tc.err, r, tc.ok, tc.reason)
		}
	}
}

func TestStateValid(t *testing.T) {
	for _, s := range contract.States {
		if !s.Valid() {
			t.Errorf("%q not valid", s)
		}
	}
	if contract.State("Paused").Valid() {
		t.Error("Paused accepted as a contract state")
	}
}
