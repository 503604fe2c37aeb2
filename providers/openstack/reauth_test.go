package openstack

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// A token Keystone revokes mid-run (DELETE /v3/auth/tokens) is refused by
// Nova with keystonemiddleware's 401; gophercloud logs in again
// (AllowReauth, set by login) with the clouds file's credential, whichever
// it is, and the call succeeds: the caller never sees the revocation.
func TestRevokedTokenHeals(t *testing.T) {
	for _, method := range []string{"application_credential", "password"} {
		t.Run(method, func(t *testing.T) {
			c := startCloud(t)
			if method == "password" {
				c.writeClouds(t, passwordClouds(c.fake.AuthURL(), testPassword))
			}
			var mu sync.Mutex
			var token string
			c.fake.SetGate(func(r *http.Request) error {
				if tok := r.Header.Get("X-Auth-Token"); tok != "" {
					mu.Lock()
					token = tok
					mu.Unlock()
				}
				return c.gate.Pass(r.Context())
			})
			p := c.provider(t)
			ctx := context.Background()
			inst, err := p.Create(ctx, request("proxy-reauth"))
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			tok := token
			mu.Unlock()
			revoke, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.fake.AuthURL()+"/auth/tokens", nil)
			if err != nil {
				t.Fatal(err)
			}
			revoke.Header.Set("X-Auth-Token", tok)
			revoke.Header.Set("X-Subject-Token", tok)
			resp, err := c.fake.Server.Client().Do(revoke)
			if err != nil || resp.StatusCode != http.StatusNoContent {
				t.Fatalf("revoke the provider's token = %v, %v; want 204", resp, err)
			}
			_ = resp.Body.Close()
			if _, err := p.Get(ctx, inst.ProviderID); err != nil {
				t.Errorf("Get after the token was revoked: %v", err)
			}
			if _, err := p.ListByTag(ctx, contract.LabelManaged, testOwner); err != nil {
				t.Errorf("ListByTag after the token was revoked: %v", err)
			}
			if r := p.Check(ctx)[0]; !r.OK || r.Details["method"] != method {
				t.Errorf("Check after the revocation = %+v, want credentials OK by %s", r, method)
			}
		})
	}
}
