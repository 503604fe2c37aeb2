package openstack

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/providers/openstack/osfake"
)

// The create body the provider really sends (through gophercloud, with
// security groups and a zone; and with every option on: config_drive, the
// managed group's ID, the group hint) is one Nova's own request schema
// takes, run by Nova's validator where its Python code is installed: the
// fake's schema checks a copy of Nova's rules, this checks the original.
func TestCreateBodyPassesNovasSchema(t *testing.T) {
	t.Run("plain", func(t *testing.T) { createBodyPassesNovasSchema(t, false) })
	t.Run("options", func(t *testing.T) { createBodyPassesNovasSchema(t, true) })
}

func createBodyPassesNovasSchema(t *testing.T, options bool) {
	c := startCloud(t)
	if options {
		c.withOptions()
	}
	// Nova resolves each named group in Neutron (400 for an unknown one).
	c.fake.AddSecurityGroup("proxy", "the proxy port")
	region := c.cfg.Regions["one"]
	region.SecurityGroups = []string{"default", "proxy"}
	c.cfg.Regions["one"] = region
	var mu sync.Mutex
	var bodies []string
	c.fake.SetGate(func(r *http.Request) error {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/servers") {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				return err
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			mu.Lock()
			bodies = append(bodies, string(b))
			mu.Unlock()
		}
		return c.gate.Pass(r.Context())
	})
	req := request("proxy-wire")
	req.CloudInit = bytes.Repeat([]byte("#cloud-config\n"), MaxCloudInit/14)
	if _, err := c.provider(t).Create(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 {
		t.Fatalf("%d create requests, want 1", len(bodies))
	}
	details, ok, err := osfake.NovaCreateSchema(t.Context(), bodies)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skip("Nova's Python code is not installed; the fake's copy of its schema took the body")
	}
	if details[0] != "" {
		t.Errorf("Nova's schema refuses the provider's create body: %s\nbody: %.400s", details[0], bodies[0])
	}
}
