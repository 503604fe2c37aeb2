package openstack

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// The faults the issue names that only a real cloud shows as it is: a
// server an operator put into ERROR, a Keystone token revoked while the
// provider uses it, a locked server. Each test shows the provider's
// answer.

// realRunning creates a server with the provider and waits until Get
// says Running.
func realRunning(t *testing.T, p *Provider, name string) contract.Instance {
	t.Helper()
	ctx := logr.NewContext(context.Background(), testr.New(t))
	req := contract.CreateRequest{
		Name: name, UID: newUUID(), Owner: "osreal-faults", Port: 3128,
		Placement: contract.Placement{Region: "one", Zone: "zone", MachineType: "small", Image: "proxy"},
		CloudInit: []byte("#cloud-config\n"),
	}
	inst, err := p.Create(ctx, req)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = p.Delete(context.Background(), inst.ProviderID) })
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		got, err := p.Get(ctx, inst.ProviderID)
		if err == nil && got.State == contract.StateRunning {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not Running after 2 minutes: %+v, %v", inst.ProviderID, got, err)
		}
	}
}

// waitGoneReal polls Get until the server is gone.
func waitGoneReal(t *testing.T, p *Provider, providerID string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		_, err := p.Get(context.Background(), providerID)
		if errors.Is(err, contract.ErrNotFound) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still there after 2 minutes: %v", providerID, err)
		}
	}
}

// TestRealCloudServerError: a server the admin put into ERROR
// (os-resetState, Nova's own action for a stuck server) reads as
// Stopped, so the operator replaces it, and a repeat Create never hands
// it back as the Proxy's server.
func TestRealCloudServerError(t *testing.T) {
	rc := startRealCloud(t)
	p := rc.provider(t)
	inst := realRunning(t, p, "osreal-error")
	id, _ := serverID(inst.ProviderID)
	if err := servers.ResetState(context.Background(), rc.admin.compute, id, servers.StateError).ExtractErr(); err != nil {
		t.Fatalf("os-resetState error: %v", err)
	}
	got, err := p.Get(context.Background(), inst.ProviderID)
	t.Logf("Get of the ERROR server: %+v, %v", got, err)
	if err != nil || got.State != contract.StateStopped {
		t.Errorf("Get of a server in ERROR = %s, %v; want Stopped, nil", got.State, err)
	}
	again, err := p.Create(context.Background(), contract.CreateRequest{
		Name: inst.Name, UID: inst.UID, Owner: inst.Owner, Port: 3128,
		Placement: contract.Placement{Region: "one", Zone: "zone", MachineType: "small", Image: "proxy"},
		CloudInit: []byte("#cloud-config\n"),
	})
	t.Logf("repeat Create over the ERROR server: %+v, %v (class %s)", again, err, contract.ClassOf(err))
	if err == nil && again.ProviderID == inst.ProviderID && again.State != contract.StateStopped {
		t.Errorf("repeat Create handed back the ERROR server as %s", again.State)
	}
	if errors.Is(err, contract.ErrNotFound) {
		t.Errorf("repeat Create = %v: not found is never a Create's answer", err)
	}
	if err == nil && again.ProviderID != inst.ProviderID {
		t.Cleanup(func() { _ = p.Delete(context.Background(), again.ProviderID) })
	}
}

// TestRealCloudTokenRevoked: the admin revokes the provider's Keystone
// token mid-run (DELETE /v3/auth/tokens); once Nova refuses it, the
// provider's next calls succeed with a new token: it logged in again.
func TestRealCloudTokenRevoked(t *testing.T) {
	rc := startRealCloud(t)
	p := rc.provider(t)
	ctx := logr.NewContext(context.Background(), testr.New(t))
	if _, err := p.ListByTag(ctx, contract.LabelManaged, "osreal-token"); err != nil {
		t.Fatalf("ListByTag: %v", err)
	}
	token := rc.wire.lastToken()
	if token == "" {
		t.Fatal("the wire saw no token")
	}
	if err := tokens.Revoke(ctx, rc.admin.identity, token).Err; err != nil {
		t.Fatalf("revoke the provider's token: %v", err)
	}
	if ok, err := tokens.Validate(ctx, rc.admin.identity, token); ok || err != nil {
		t.Fatalf("Keystone still validates the revoked token: %v, %v", ok, err)
	}
	// Nova keeps a token it has validated for token_cache_time; the
	// provider's next calls are made once Nova refuses this one, so
	// they can only succeed by logging in again.
	if waited, ok := rc.waitNovaRefuses(ctx, token); !ok {
		t.Fatalf("Nova still accepts the revoked token after %s", waited)
	}
	inst := realRunning(t, p, "osreal-token")
	if rc.wire.lastToken() == token {
		t.Errorf("the provider's calls after the revocation carried the revoked token; want a new one")
	}
	if err := p.Delete(ctx, inst.ProviderID); err != nil {
		t.Fatalf("Delete after the revocation: %v", err)
	}
	waitGoneReal(t, p, inst.ProviderID)
}

// TestRealCloudLockedDelete: Nova refuses a non-admin's delete of a
// server the admin locked (409, InstanceIsLocked); the provider's Delete
// reports ErrPermanent, the server stays, and once it is
// unlocked the Delete goes through.
func TestRealCloudLockedDelete(t *testing.T) {
	rc := startRealCloud(t)
	p := rc.provider(t)
	inst := realRunning(t, p, "osreal-locked")
	id, _ := serverID(inst.ProviderID)
	if err := servers.Lock(context.Background(), rc.admin.compute, id).ExtractErr(); err != nil {
		t.Fatalf("lock: %v", err)
	}
	err := p.Delete(context.Background(), inst.ProviderID)
	t.Logf("Delete of a locked server: %v (class %s)", err, contract.ClassOf(err))
	if !errors.Is(err, contract.ErrPermanent) {
		t.Errorf("Delete of a locked server = %v (class %s); want ErrPermanent: it never heals on its own", err, contract.ClassOf(err))
	}
	if got, err := p.Get(context.Background(), inst.ProviderID); err != nil || got.State != contract.StateRunning {
		t.Errorf("Get of the locked server = %s, %v; want it still Running", got.State, err)
	}
	if err := servers.Unlock(context.Background(), rc.admin.compute, id).ExtractErr(); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	if err := p.Delete(context.Background(), inst.ProviderID); err != nil {
		t.Fatalf("Delete once unlocked: %v", err)
	}
	waitGoneReal(t, p, inst.ProviderID)
}
