package openstack

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// otherOwner is a second install (or entry) sharing the fake cloud.
const otherOwner = "d00dfeed-lab"

// The managed mark's value is the request's Owner: a tag Nova filters on
// and the metadata value, read back by Create, Get (from a fresh provider)
// and ListByTag.
func TestOwnerIsTheManagedMark(t *testing.T) {
	c := startCloud(t)
	ctx := context.Background()
	req := request("proxy-owned")
	inst, err := c.provider(t).Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	s := named(c, req.Name)[0]
	if !slices.Contains(s.Tags, "egressproxies-managed") || !slices.Contains(s.Tags, "egressproxies-owner-"+testOwner) {
		t.Errorf("tags %v lack egressproxies-managed and egressproxies-owner-%s", s.Tags, testOwner)
	}
	if s.Metadata["egressproxies.io:managed"] != testOwner {
		t.Errorf("metadata %v: egressproxies.io:managed is not %s", s.Metadata, testOwner)
	}
	if inst.Owner != testOwner {
		t.Errorf("Create returned Owner %q, want %q", inst.Owner, testOwner)
	}
	if got, err := c.provider(t).Get(ctx, inst.ProviderID); err != nil || got.Owner != testOwner {
		t.Errorf("Get from a fresh provider = %+v, %v; want Owner %q", got, err, testOwner)
	}
	assertListed(t, c.provider(t), contract.LabelManaged, testOwner, inst)
}

// Installs sharing one project each list only their own servers by their
// Owner — also Owners too long for a Nova tag, which share a tag prefix —
// neither is listed as legacy, a UID list finds a server whatever its
// owner, and the same Proxy under another Owner adopts its server.
func TestOwnersDoNotListEachOther(t *testing.T) {
	c := startCloud(t)
	p := c.provider(t)
	ctx := context.Background()
	long := strings.Repeat("a", 8) + "-" + strings.Repeat("e", 54) // 63 characters
	longer := long[:62] + "f"
	owners := []string{testOwner, otherOwner, long, longer}
	made := map[string]contract.Instance{}
	ownerTags := map[string]string{}
	for i, owner := range owners {
		req := request(fmt.Sprintf("proxy-owner-%d", i))
		req.UID = fmt.Sprintf("5f1d7c2e-8a4b-4c3d-9e2f-%012d", 100+i)
		req.Owner = owner
		inst, err := p.Create(ctx, req)
		if err != nil {
			t.Fatalf("Create for Owner %s: %v", owner, err)
		}
		made[owner] = inst
		for _, tag := range named(c, req.Name)[0].Tags {
			if len(tag) > maxTag {
				t.Errorf("tag %q of Owner %s is longer than Nova's %d characters", tag, owner, maxTag)
			}
			if strings.HasPrefix(tag, "egressproxies-owner-") {
				if other, dup := ownerTags[tag]; dup {
					t.Errorf("Owners %s and %s share the tag %s: Nova cannot tell their servers apart", other, owner, tag)
				}
				ownerTags[tag] = owner
			}
		}
	}
	for _, owner := range owners {
		assertListed(t, p, contract.LabelManaged, owner, made[owner])
	}
	assertListed(t, p, contract.LabelManaged, contract.LegacyManagedValue)
	assertListed(t, p, contract.LabelUID, made[otherOwner].UID, made[otherOwner])

	again := request(made[otherOwner].Name)
	again.UID = made[otherOwner].UID
	if got, err := p.Create(ctx, again); err != nil || got.ProviderID != made[otherOwner].ProviderID || got.Owner != otherOwner {
		t.Errorf("Create under another Owner = %+v, %v; want %s adopted with Owner %s", got, err, made[otherOwner].ProviderID, otherOwner)
	}
	if n := len(c.fake.Servers()); n != len(owners) {
		t.Errorf("Nova holds %d servers, want %d", n, len(owners))
	}
}

// A server made by the previous release carries the managed tag without an
// owner tag and "managed: true" in its metadata: it is listed by
// LegacyManagedValue and by its UID, never by an Owner, Get reads its Owner
// as "true", and a Create of its name and UID adopts it, marks unchanged.
func TestLegacyServer(t *testing.T) {
	c := startCloud(t)
	p := c.provider(t)
	ctx := context.Background()
	req := request("proxy-legacy")
	made, err := control{c}.CreateLegacy(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	legacy := contract.Instance{ProviderID: made.ProviderID, Owner: contract.LegacyManagedValue}
	assertListed(t, p, contract.LabelManaged, contract.LegacyManagedValue, legacy)
	assertListed(t, p, contract.LabelManaged, testOwner)
	assertListed(t, p, contract.LabelUID, req.UID, legacy)
	if got, err := c.provider(t).Get(ctx, legacy.ProviderID); err != nil || got.Owner != contract.LegacyManagedValue || got.UID != req.UID {
		t.Errorf("Get = %+v, %v; want Owner %q and UID %s", got, err, contract.LegacyManagedValue, req.UID)
	}
	adopted, err := c.provider(t).Create(ctx, req)
	if err != nil || adopted.ProviderID != legacy.ProviderID || adopted.Owner != contract.LegacyManagedValue {
		t.Fatalf("Create over the legacy server = %+v, %v; want it adopted as %s, Owner %q", adopted, err, legacy.ProviderID, contract.LegacyManagedValue)
	}
	if n := len(named(c, req.Name)); n != 1 {
		t.Errorf("Nova holds %d servers named %s, want 1", n, req.Name)
	}
}

// Nova filters by the owner tag: an install's list asks for its own
// servers only, not for every managed server to sift here.
func TestListByOwnerFiltersOnNova(t *testing.T) {
	c := startCloud(t)
	var mu sync.Mutex
	var queries []string
	c.fake.SetGate(func(r *http.Request) error {
		if strings.HasSuffix(r.URL.Path, "/servers/detail") {
			mu.Lock()
			queries = append(queries, r.URL.Query().Get("tags"))
			mu.Unlock()
		}
		return nil
	})
	if _, err := c.provider(t).ListByTag(context.Background(), contract.LabelManaged, testOwner); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := "egressproxies-managed,egressproxies-owner-" + testOwner
	if len(queries) != 2 || queries[0] != want || queries[1] != want {
		t.Errorf("Nova was asked tags=%q, want %q in each region", queries, want)
	}
}

// assertListed checks ListByTag(key, value) returns exactly want, by
// ProviderID, each with its Owner.
func assertListed(t *testing.T, p *Provider, key, value string, want ...contract.Instance) {
	t.Helper()
	got, err := p.ListByTag(context.Background(), key, value)
	if err != nil {
		t.Fatalf("ListByTag(%s, %s): %v", key, value, err)
	}
	owners := func(insts []contract.Instance) map[string]string {
		m := map[string]string{}
		for _, i := range insts {
			m[i.ProviderID] = i.Owner
		}
		return m
	}
	if g, w := owners(got), owners(want); len(got) != len(want) || fmt.Sprint(g) != fmt.Sprint(w) {
		t.Errorf("ListByTag(%s, %s) = %v (ProviderID: Owner), want %v", key, value, g, w)
	}
}
