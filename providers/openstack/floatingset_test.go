package openstack

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/providers/openstack/osfake"
)

// With floatingIPs.addresses a replica draws its floating IP from the
// set allocated in the project beforehand, in the set's order, keeps it
// across its replacement, and gives it back when released; the provider
// never creates or deletes one. None free is quota, naming the addresses
// not allocated; an address in use by another port is not free; a draw
// another replica won meanwhile (412 on the revision) is drawn again.
func TestFloatingIPsDrawnFromTheSet(t *testing.T) {
	c := startCloud(t, func(o *osfake.Options) {
		o.HoldBuilds = true
		o.External = &osfake.ExternalNetwork{ID: testExternal, CIDR: "203.0.113.0/24"}
	})
	ctx := context.Background()
	p0 := c.provider(t)
	cl, err := p0.session(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	allocate := func(address, port string) {
		t.Helper()
		if _, err := floatingips.Create(ctx, cl.network, floatingips.CreateOpts{FloatingNetworkID: testExternal, FloatingIP: address, PortID: port}).Extract(); err != nil {
			t.Fatalf("allocate %s: %v", address, err)
		}
	}
	// Someone's server's port, holding an address of the set.
	theirs, err := ports.Create(ctx, cl.network, ports.CreateOpts{NetworkID: c.fake.Options().Network.ID, Name: "someone-elses"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	allocate("203.0.113.13", theirs.ID)
	allocate("203.0.113.10", "")
	allocate("203.0.113.11", "")
	set := []string{"203.0.113.13", "203.0.113.12", "203.0.113.11", "203.0.113.10"} // .12 not allocated
	for k, r := range c.cfg.Regions {
		r.FloatingIPs = &FloatingIPs{Network: testExternal, Addresses: set}
		c.cfg.Regions[k] = r
	}
	p := c.provider(t)
	const uid = "6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f"
	create := func(name string, replica int32) (contract.Instance, error) {
		req := request(name)
		req.UID, req.Replica = uid, replica
		inst, err := p.Create(ctx, req)
		if err != nil {
			return inst, err
		}
		return p.Get(ctx, inst.ProviderID)
	}

	// A draw another replica wins meanwhile is drawn again.
	c.fake.FailNext("PUT", `/floatingips/`, 412, `{"NeutronError": {"type": "HTTPPreconditionFailed", "message": "Constrained to 1, but current revision is 2", "detail": ""}}`)
	r0, err := create("set-r0", 0)
	if err != nil || r0.EgressIP != "203.0.113.11" {
		t.Fatalf("replica 0 = egress %q, %v; want 203.0.113.11, the set's first address allocated and free", r0.EgressIP, err)
	}
	r1, err := create("set-r1", 1)
	if err != nil || r1.EgressIP != "203.0.113.10" {
		t.Fatalf("replica 1 = egress %q, %v; want 203.0.113.10", r1.EgressIP, err)
	}
	_, err = create("set-r2", 2)
	if !errors.Is(err, contract.ErrQuota) || !strings.Contains(err.Error(), `regions["one"].floatingIPs.addresses`) || !strings.Contains(err.Error(), "203.0.113.12") {
		t.Fatalf("replica 2 with the set taken = %v; want ErrQuota naming the field and the address not allocated", err)
	}

	// Kept across the replica's replacement.
	if err := p.Delete(ctx, r0.ProviderID); err != nil {
		t.Fatal(err)
	}
	again, err := create("set-r0-again", 0)
	if err != nil || again.EgressIP != "203.0.113.11" {
		t.Fatalf("replica 0 made again = egress %q, %v; want its 203.0.113.11", again.EgressIP, err)
	}

	// Released: back to the set, not deleted; the next replica draws it.
	if err := p.ReleaseEgress(ctx, contract.Egress{Region: "one", UID: uid, Replica: 1}); err != nil {
		t.Fatal(err)
	}
	var back *osfake.FloatingIP
	for _, f := range c.fake.FloatingIPs() {
		if f.Address == "203.0.113.10" {
			back = &f
		}
	}
	if back == nil || back.PortID != "" || back.Description != "" {
		t.Fatalf("203.0.113.10 after its release = %+v; want it kept, with no port and no marks", back)
	}
	r2, err := create("set-r2-again", 2)
	if err != nil || r2.EgressIP != "203.0.113.10" {
		t.Fatalf("replica 2 after a release = egress %q, %v; want 203.0.113.10", r2.EgressIP, err)
	}
	if n := len(c.fake.FloatingIPs()); n != 3 {
		t.Errorf("the project holds %d floating IPs, want the 3 allocated: the provider never creates one with a set", n)
	}
}
