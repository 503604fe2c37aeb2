package proxmox

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

// TestIntegration runs one real lifecycle against a Proxmox VE cluster
// named by the PROXMOX_TEST_* variables (make test-integration-proxmox): a
// VM is cloned from the template, gets its seed, runs with an address the
// guest agent reports, is found by its tags, and is destroyed with its
// seed. Without the variables it is skipped, saying which are missing.
func TestIntegration(t *testing.T) {
	vars := contracttest.RequireEnv(t, "real Proxmox VE cluster", "PROXMOX_TEST_", []string{"ENDPOINT", "TOKEN_ID_FILE", "TOKEN_SECRET_FILE", "NODE", "ISO_STORAGE", "TEMPLATE"},
		"PROXMOX_TEST_CA_FILE", "PROXMOX_TEST_STORAGE for full clones", "PROXMOX_TEST_VMID_MIN/MAX")
	img := Image{TemplateName: vars["TEMPLATE"]}
	if id, err := strconv.Atoi(vars["TEMPLATE"]); err == nil {
		img = Image{TemplateVMID: id}
	}
	region := Region{
		Endpoint: vars["ENDPOINT"], TokenIDFile: vars["TOKEN_ID_FILE"], TokenSecretFile: vars["TOKEN_SECRET_FILE"],
		CAFile: os.Getenv("PROXMOX_TEST_CA_FILE"),
		Zones:  map[string]Zone{"test": {Node: vars["NODE"], ISOStorage: vars["ISO_STORAGE"], Storage: os.Getenv("PROXMOX_TEST_STORAGE")}},
	}
	if lo, hi := os.Getenv("PROXMOX_TEST_VMID_MIN"), os.Getenv("PROXMOX_TEST_VMID_MAX"); lo != "" && hi != "" {
		region.VMIDs.Min, _ = strconv.Atoi(lo)
		region.VMIDs.Max, _ = strconv.Atoi(hi)
	}
	p, err := New(Config{
		Regions:      map[string]Region{"test": region},
		MachineTypes: map[string]MachineType{"small": {Cores: 1, MemoryMiB: 1024}},
		Images:       map[string]Image{"proxy": img},
		FullClone:    os.Getenv("PROXMOX_TEST_STORAGE") != "",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range p.Check(context.Background()) {
		t.Logf("check %s: %s %s %v", r.Target, r.Reason, r.Message, r.Details)
	}
	name := fmt.Sprintf("egress-it-%d", time.Now().Unix()%1000000)
	contracttest.RunLifecycle(t, contracttest.Lifecycle{
		Provider: p,
		Request: contract.CreateRequest{
			Name: name, UID: "0e9d6c1a-7f3b-4d2e-9a5c-integration01", Owner: "integration-test", Port: 3128,
			Placement: contract.Placement{Region: "test", Zone: "test", MachineType: "small", Image: "proxy"},
			CloudInit: []byte("#cloud-config\nhostname: " + name + "\npackages: [qemu-guest-agent, tinyproxy]\nruncmd: [[systemctl, start, qemu-guest-agent]]\n"),
		},
		Timeout: 15 * time.Minute,
		Probe: func(ctx context.Context, ip string) error {
			conn, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", net.JoinHostPort(ip, "3128"))
			if err == nil {
				_ = conn.Close()
			}
			return err
		},
	})
}
