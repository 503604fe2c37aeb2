package vsphere

import (
	"context"
	"errors"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// A destroy another client started (a person in the vSphere client): the
// VM's recentTask shows it, Get says Terminated and Delete returns nil at
// once (spec entry 11). The harness's GetDuringDelete plays the
// operator's own Delete instead (the control's BeginDelete).
func TestGetDuringAnotherClientsDestroy(t *testing.T) {
	v := startVcsim(t)
	c := control{v}
	p := v.provider(t)
	ctx := context.Background()
	inst := createVM(t, p, "foreign-destroy", "uid-foreign-destroy", testOwner)
	finish, err := c.beginForeignDelete(ctx, inst.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	defer finish()
	if got, err := p.Get(ctx, inst.ProviderID); err != nil || got.State != contract.StateTerminated {
		t.Errorf("Get during another client's destroy = %s, %v: want Terminated", got.State, err)
	}
	if err := p.Delete(ctx, inst.ProviderID); err != nil {
		t.Errorf("Delete during another client's destroy = %v, want nil", err)
	}
	finish()
	if _, err := p.Get(ctx, inst.ProviderID); !errors.Is(err, contract.ErrNotFound) {
		t.Errorf("Get once the destroy ended = %v, want NotFound", err)
	}
}
