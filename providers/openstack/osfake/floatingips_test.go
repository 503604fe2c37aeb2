package osfake_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/attributestags"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"

	"github.com/egress-proxies/egress-proxies-operator/providers/openstack/osfake"
)

// taggedFloatingIP is a floating IP create with tags in its body, which
// gophercloud's CreateOpts cannot send.
type taggedFloatingIP struct {
	floatingips.CreateOpts
	tags []string
}

func (o taggedFloatingIP) ToFloatingIPCreateMap() (map[string]any, error) {
	m, err := o.CreateOpts.ToFloatingIPCreateMap()
	if err == nil {
		m["floatingip"].(map[string]any)["tags"] = o.tags
	}
	return m, err
}

// A floating IP as Zed's Neutron keeps one: allocated on the external
// network only, with a description but no tags in the create (tags set
// after), moved from port to port by an update, kept unassociated when
// its port is deleted, found by description and by tags.
func TestFloatingIPLifecycle(t *testing.T) {
	ext := &osfake.ExternalNetwork{ID: "5b3c3a52-4c5e-4c44-9a5c-7b0e2d6f9a10", CIDR: "203.0.113.0/29"}
	c, compute := start(t, func(o *osfake.Options) { o.Network.Subnets = []osfake.Subnet{static}; o.External = ext })
	n := network(t, compute)
	ctx := context.Background()
	net := c.Options().Network

	// gophercloud refuses an empty floating_network_id itself: post raw.
	resp, err := n.Post(ctx, n.ServiceURL("floatingips"), map[string]any{"floatingip": map[string]any{"description": "x"}}, nil, nil)
	if resp != nil {
		_ = resp.Body.Close()
	}
	wantStatus(t, "no network", err, http.StatusBadRequest)
	if err != nil && !strings.Contains(err.Error(), "Required attribute 'floating_network_id' not specified") {
		t.Errorf("no network: %v", err)
	}
	_, err = floatingips.Create(ctx, n, floatingips.CreateOpts{FloatingNetworkID: net.ID}).Extract()
	wantStatus(t, "the project network", err, http.StatusBadRequest)
	if err != nil && !strings.Contains(err.Error(), "Network "+net.ID+" is not a valid external network.") {
		t.Errorf("the project network: %v", err)
	}
	_, err = floatingips.Create(ctx, n, floatingips.CreateOpts{FloatingNetworkID: "0c7d9c35-8a4f-4a53-b7a4-3b8ac0e5f6a1"}).Extract()
	wantStatus(t, "an unknown network", err, http.StatusNotFound)
	_, err = floatingips.Create(ctx, n, taggedFloatingIP{floatingips.CreateOpts{FloatingNetworkID: ext.ID}, []string{"a"}}).Extract()
	wantStatus(t, "tags in the create", err, http.StatusBadRequest)
	if err != nil && !strings.Contains(err.Error(), "Attribute 'tags' not allowed in POST") {
		t.Errorf("tags in the create: %v", err)
	}

	f, err := floatingips.Create(ctx, n, floatingips.CreateOpts{FloatingNetworkID: ext.ID, Description: "mark"}).Extract()
	if err != nil || f.FloatingIP != "203.0.113.2" || f.PortID != "" || f.Status != "DOWN" || f.Description != "mark" {
		t.Fatalf("created %+v, %v", f, err)
	}
	if _, err := attributestags.ReplaceAll(ctx, n, "floatingips", f.ID, attributestags.ReplaceAllOpts{Tags: []string{"uid=1", "replica=0"}}).Extract(); err != nil {
		t.Fatal(err)
	}
	list := func(opts floatingips.ListOpts) []floatingips.FloatingIP {
		t.Helper()
		pages, err := floatingips.List(n, opts).AllPages(ctx)
		if err != nil {
			t.Fatal(err)
		}
		all, err := floatingips.ExtractFloatingIPs(pages)
		if err != nil {
			t.Fatal(err)
		}
		return all
	}
	if got := list(floatingips.ListOpts{Tags: "uid=1,replica=0"}); len(got) != 1 || got[0].ID != f.ID {
		t.Errorf("by tags: %+v", got)
	}
	if got := list(floatingips.ListOpts{Tags: "uid=1,replica=1"}); len(got) != 0 {
		t.Errorf("by a tag it lacks: %+v", got)
	}
	if got := list(floatingips.ListOpts{Description: "mark"}); len(got) != 1 || !slices.Equal(got[0].Tags, []string{"uid=1", "replica=0"}) {
		t.Errorf("by description: %+v", got)
	}

	sub := net.Subnets[0]
	mkPort := func(ip string) *ports.Port {
		p, err := ports.Create(ctx, n, ports.CreateOpts{NetworkID: net.ID, FixedIPs: []ports.IP{{SubnetID: sub.ID, IPAddress: ip}}}).Extract()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := mkPort("10.0.0.50"), mkPort("10.0.0.51")
	assoc := func(id string, port *string) (*floatingips.FloatingIP, error) {
		return floatingips.Update(ctx, n, id, floatingips.UpdateOpts{PortID: port}).Extract()
	}
	if got, err := assoc(f.ID, &a.ID); err != nil || got.PortID != a.ID || got.FixedIP != "10.0.0.50" || got.Status != "ACTIVE" {
		t.Fatalf("associated with a: %+v, %v", got, err)
	}
	if got, err := assoc(f.ID, &b.ID); err != nil || got.PortID != b.ID || got.FixedIP != "10.0.0.51" {
		t.Fatalf("moved to b: %+v, %v", got, err)
	}
	second, err := floatingips.Create(ctx, n, floatingips.CreateOpts{FloatingNetworkID: ext.ID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	_, err = assoc(second.ID, &b.ID)
	wantStatus(t, "a second floating IP on b's fixed IP", err, http.StatusConflict)
	missing := "3f2a1b0c-1111-4222-8333-944455556666"
	_, err = assoc(second.ID, &missing)
	wantStatus(t, "an unknown port", err, http.StatusNotFound)

	if err := ports.Delete(ctx, n, b.ID).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if got, err := floatingips.Get(ctx, n, f.ID).Extract(); err != nil || got.PortID != "" || got.FixedIP != "" || got.FloatingIP != "203.0.113.2" {
		t.Errorf("after its port's delete: %+v, %v; want it kept, unassociated", got, err)
	}
	if got, err := assoc(f.ID, &a.ID); err != nil || got.PortID != a.ID {
		t.Fatalf("associated with a again: %+v, %v", got, err)
	}
	none := ""
	if got, err := assoc(f.ID, &none); err != nil || got.PortID != "" {
		t.Errorf("disassociated: %+v, %v", got, err)
	}

	// A /29 has five addresses from its second host on: three more.
	for range 3 {
		if _, err := floatingips.Create(ctx, n, floatingips.CreateOpts{FloatingNetworkID: ext.ID}).Extract(); err != nil {
			t.Fatal(err)
		}
	}
	_, err = floatingips.Create(ctx, n, floatingips.CreateOpts{FloatingNetworkID: ext.ID}).Extract()
	wantStatus(t, "an exhausted network", err, http.StatusConflict)
	if err != nil && !strings.Contains(err.Error(), "No more IP addresses available on network "+ext.ID+".") {
		t.Errorf("an exhausted network: %v", err)
	}
	if err := floatingips.Delete(ctx, n, f.ID).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "a second delete", floatingips.Delete(ctx, n, f.ID).ExtractErr(), http.StatusNotFound)
	if got := c.FloatingIPs(); len(got) != 4 || slices.ContainsFunc(got, func(x osfake.FloatingIP) bool { return x.ID == f.ID }) {
		t.Errorf("after the delete: %+v", got)
	}
}

// Neutron refuses what the project's quota or routing does not allow.
func TestFloatingIPRefusals(t *testing.T) {
	ext := &osfake.ExternalNetwork{ID: "5b3c3a52-4c5e-4c44-9a5c-7b0e2d6f9a10", CIDR: "203.0.113.0/24", Unrouted: true}
	c, compute := start(t, func(o *osfake.Options) {
		o.Network.Subnets = []osfake.Subnet{static}
		o.External = ext
		o.Quota.FloatingIPs = 1
	})
	n := network(t, compute)
	ctx := context.Background()
	net := c.Options().Network
	p, err := ports.Create(ctx, n, ports.CreateOpts{NetworkID: net.ID, FixedIPs: []ports.IP{{SubnetID: net.Subnets[0].ID, IPAddress: "10.0.0.50"}}}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	f, err := floatingips.Create(ctx, n, floatingips.CreateOpts{FloatingNetworkID: ext.ID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	_, err = floatingips.Update(ctx, n, f.ID, floatingips.UpdateOpts{PortID: &p.ID}).Extract()
	wantStatus(t, "no router to the external network", err, http.StatusNotFound)
	if err != nil && !strings.Contains(err.Error(), "External network "+ext.ID+" is not reachable from subnet "+net.Subnets[0].ID+".") {
		t.Errorf("no router: %v", err)
	}
	_, err = floatingips.Create(ctx, n, floatingips.CreateOpts{FloatingNetworkID: ext.ID}).Extract()
	wantStatus(t, "over quota", err, http.StatusConflict)
	if err != nil && (!strings.Contains(err.Error(), "Quota exceeded for resources: ['floatingip'].") || !gophercloud.ResponseCodeIs(err, http.StatusConflict)) {
		t.Errorf("over quota: %v", err)
	}
}

// An update under If-Match: revision_number=N goes through only while the
// floating IP's revision is N (412 otherwise, the update not applied), and
// every update bumps the revision.
func TestFloatingIPUpdateIfMatch(t *testing.T) {
	ext := &osfake.ExternalNetwork{ID: "5b3c3a52-4c5e-4c44-9a5c-7b0e2d6f9a10", CIDR: "203.0.113.0/29"}
	_, compute := start(t, func(o *osfake.Options) { o.External = ext })
	n := network(t, compute)
	ctx := context.Background()
	f, err := floatingips.Create(ctx, n, floatingips.CreateOpts{FloatingNetworkID: ext.ID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs, stale := "mine", "theirs", f.RevisionNumber
	got, err := floatingips.Update(ctx, n, f.ID, floatingips.UpdateOpts{Description: &mine, RevisionNumber: &stale}).Extract()
	if err != nil || got.Description != "mine" || got.RevisionNumber != stale+1 {
		t.Fatalf("update at the current revision = %+v, %v; want applied and the revision bumped", got, err)
	}
	_, err = floatingips.Update(ctx, n, f.ID, floatingips.UpdateOpts{Description: &theirs, RevisionNumber: &stale}).Extract()
	wantStatus(t, "an update at a stale revision", err, http.StatusPreconditionFailed)
	if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("Constrained to %d, but current revision is %d", stale, stale+1)) {
		t.Errorf("an update at a stale revision: %v", err)
	}
	if got, err := floatingips.Get(ctx, n, f.ID).Extract(); err != nil || got.Description != "mine" {
		t.Errorf("after the refused update: %+v, %v; want the description unchanged", got, err)
	}
}
