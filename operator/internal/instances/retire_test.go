package instances

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// failingGet is a provider whose Gets fail with err.
type failingGet struct {
	contract.Provider
	err error
}

func (p failingGet) Get(context.Context, string) (contract.Instance, error) {
	return contract.Instance{}, p.err
}

// Retire deletes only an instance it read back as the Proxy's: another
// Proxy's under the providerID is left and named, one gone already is
// done, a failed read deletes nothing, and a drain cut short does nothing.
func TestRetireDeletesOnlyWhatItReadBackAsTheProxys(t *testing.T) {
	const other = "6f1c1b0e-0000-4000-8000-000000000002"
	for _, tc := range []struct {
		name        string
		uid         string
		gone        bool
		getErr      error
		cut         bool
		wantDeleted bool
		wantOther   bool
		wantFailed  string
		wantLeft    bool
	}{
		{name: "the Proxy's", uid: sweepUID, wantDeleted: true},
		{name: "another Proxy's", uid: other, wantOther: true, wantLeft: true},
		{name: "gone already", uid: sweepUID, gone: true},
		{name: "unreadable", uid: sweepUID, getErr: errors.New("backend down"), wantFailed: "Get", wantLeft: true},
		{name: "drain cut short", uid: sweepUID, cut: true, wantLeft: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem, _ := newCloud(t, false)
			vm := createVM(t, mem, tc.uid, "retired", 0)
			var prov contract.Provider = mem
			if tc.getErr != nil {
				prov = failingGet{Provider: mem, err: tc.getErr}
			}
			id := vm.ProviderID
			if tc.gone {
				id = "r1/never-made"
			}
			ctx, drain := context.Background(), time.Duration(0)
			if tc.cut {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				cancel()
				drain = time.Hour
			}
			done := Retire(ctx, prov, sweepUID, id, drain)
			if done.Deleted != tc.wantDeleted || (done.Other != nil) != tc.wantOther || done.Failed != tc.wantFailed {
				t.Errorf("Retire = %+v; want deleted %v, other %v, failed %q", done, tc.wantDeleted, tc.wantOther, tc.wantFailed)
			}
			if done.Other != nil && done.Other.UID != other {
				t.Errorf("Retire named %q as the other Proxy's UID, want %q", done.Other.UID, other)
			}
			_, err := mem.Get(context.Background(), vm.ProviderID)
			if left := err == nil; left != (tc.wantLeft || tc.gone) {
				t.Errorf("after Retire, the VM is there: %v (Get: %v); want %v", left, err, tc.wantLeft || tc.gone)
			}
		})
	}
}
