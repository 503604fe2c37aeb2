package openstack

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/providers/openstack/osfake"
)

const testExternal = "5b3c3a52-4c5e-4c44-9a5c-7b0e2d6f9a10"

// withFloatingIPs gives every region of c's config floating IPs on
// network.
func (c *cloud) withFloatingIPs(network string) {
	for k, r := range c.cfg.Regions {
		r.FloatingIPs = &FloatingIPs{Network: network}
		c.cfg.Regions[k] = r
	}
}

// Neutron's refusals of a floating IP reach the operator in the class
// that says what to do: a network that is not external, or that the
// region's network has no router to, is the config's to fix (permanent,
// naming the field); an exhausted network or quota is capacity (quota).
func TestFloatingIPRefusalsAreClassified(t *testing.T) {
	req := func() contract.CreateRequest {
		return contract.CreateRequest{Name: "fip-refused", UID: "0b7f8e7e-5a0c-4c43-9d2e-6f0e2b1a7c55", Owner: "lab-os", Port: 3128,
			Placement: contract.Placement{Region: "one", Zone: "az1", MachineType: "small", Image: "debian-12"}, CloudInit: []byte("#cloud-config\n")}
	}
	for _, tc := range []struct {
		name    string
		adjust  func(*osfake.Options)
		network func(*cloud) string
		class   error
		want    string
	}{
		{"the project network", nil, func(c *cloud) string { return c.fake.Options().Network.ID }, contract.ErrPermanent, "is not a valid external network"},
		{"no such network", nil, func(*cloud) string { return "0c7d9c35-8a4f-4a53-b7a4-3b8ac0e5f6a1" }, contract.ErrPermanent, "could not be found"},
		{"no router", func(o *osfake.Options) { o.External.Unrouted = true }, func(*cloud) string { return testExternal }, contract.ErrPermanent, "no router joins the region's network to it"},
		{"exhausted", func(o *osfake.Options) { o.External.CIDR = "203.0.113.0/31" }, func(*cloud) string { return testExternal }, contract.ErrQuota, "No more IP addresses available"},
		{"over quota", func(o *osfake.Options) { o.Quota.FloatingIPs = 1 }, func(*cloud) string { return testExternal }, contract.ErrQuota, "Quota exceeded for resources: ['floatingip']"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCloud(t, func(o *osfake.Options) {
				o.External = &osfake.ExternalNetwork{ID: testExternal, CIDR: "203.0.113.0/24"}
				if tc.adjust != nil {
					tc.adjust(o)
				}
			})
			c.withFloatingIPs(tc.network(c))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			p := c.provider(t)
			if tc.name == "over quota" {
				// Replica 1 takes the project's one floating IP.
				first := req()
				first.Name, first.Replica = "fip-first", 1
				if _, err := p.Create(ctx, first); err != nil {
					t.Fatal(err)
				}
			}
			_, err := p.Create(ctx, req())
			if !errors.Is(err, tc.class) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Create = %v (class %s), want class %v and %q", err, contract.ClassOf(err), tc.class, tc.want)
			}
			if errors.Is(tc.class, contract.ErrPermanent) && !strings.Contains(err.Error(), `regions["one"].floatingIPs.network`) {
				t.Errorf("Create = %v: a permanent refusal names the field", err)
			}
			for _, s := range c.fake.Servers() {
				if s.Name == "fip-refused" {
					t.Errorf("a server made although its floating IP was refused: %+v", s)
				}
			}
		})
	}
}
