package vsphere

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

// TestIntegration runs one real lifecycle against a vCenter named by the
// VSPHERE_TEST_* variables (make test-integration-vsphere): a VM is cloned
// from the template, runs with an address, is found by its marks, and is
// destroyed. Without the variables it is skipped, saying which are missing.
// With VSPHERE_TEST_STATIC_ADDRESS (and _GATEWAY, optionally _DNS, comma
// separated) the VM is made with that static address, and must run and
// answer at exactly it: the guest applied the network of its metadata.
func TestIntegration(t *testing.T) {
	vars := contracttest.RequireEnv(t, "real vCenter", "VSPHERE_TEST_", []string{"SERVER", "USERNAME_FILE", "PASSWORD_FILE", "DATACENTER", "FOLDER", "RESOURCE_POOL", "DATASTORE", "TEMPLATE"},
		"VSPHERE_TEST_NETWORK", "VSPHERE_TEST_CA_FILE", "VSPHERE_TEST_STATIC_ADDRESS", "VSPHERE_TEST_STATIC_GATEWAY", "VSPHERE_TEST_STATIC_DNS")
	static := integrationNetwork(t)
	p, err := New(Config{
		Server: vars["SERVER"], UsernameFile: vars["USERNAME_FILE"], PasswordFile: vars["PASSWORD_FILE"],
		CAFile: os.Getenv("VSPHERE_TEST_CA_FILE"),
		Regions: map[string]Region{"test": {Datacenter: vars["DATACENTER"], Folder: vars["FOLDER"], Zones: map[string]Zone{
			"test": {ResourcePool: vars["RESOURCE_POOL"], Datastore: vars["DATASTORE"], Network: os.Getenv("VSPHERE_TEST_NETWORK")},
		}}},
		MachineTypes: map[string]MachineType{"small": {CPUs: 1, MemoryMiB: 1024}},
		Images:       map[string]string{"proxy": vars["TEMPLATE"]},
	})
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("egress-it-%d", time.Now().Unix()%1000000)
	contracttest.RunLifecycle(t, contracttest.Lifecycle{
		Provider: p,
		Request: contract.CreateRequest{
			Name: name, UID: "0e9d6c1a-7f3b-4d2e-9a5c-integration01", Owner: testOwner, Port: 3128,
			Placement: contract.Placement{Region: "test", Zone: "test", MachineType: "small", Image: "proxy"},
			CloudInit: []byte("#cloud-config\nhostname: " + name + "\n"),
			Network:   static,
		},
		Timeout: 15 * time.Minute,
		Probe: func(ctx context.Context, ip string) error {
			if static != nil && ip != static.IP() {
				return fmt.Errorf("running at %s, want the static address %s", ip, static.IP())
			}
			conn, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", net.JoinHostPort(ip, "3128"))
			if err == nil {
				_ = conn.Close()
			}
			return err
		},
	})
}

// integrationNetwork is the static network VSPHERE_TEST_STATIC_* name, nil
// without VSPHERE_TEST_STATIC_ADDRESS.
func integrationNetwork(t *testing.T) *contract.StaticNetwork {
	t.Helper()
	addr := os.Getenv("VSPHERE_TEST_STATIC_ADDRESS")
	if addr == "" {
		return nil
	}
	var n contract.StaticNetwork
	var err error
	if n.Address, err = netip.ParsePrefix(addr); err != nil {
		t.Fatalf("VSPHERE_TEST_STATIC_ADDRESS %q: %v", addr, err)
	}
	if n.Gateway, err = netip.ParseAddr(os.Getenv("VSPHERE_TEST_STATIC_GATEWAY")); err != nil {
		t.Fatalf("VSPHERE_TEST_STATIC_GATEWAY %q: %v", os.Getenv("VSPHERE_TEST_STATIC_GATEWAY"), err)
	}
	for _, d := range strings.FieldsFunc(os.Getenv("VSPHERE_TEST_STATIC_DNS"), func(r rune) bool { return r == ',' }) {
		a, err := netip.ParseAddr(strings.TrimSpace(d))
		if err != nil {
			t.Fatalf("VSPHERE_TEST_STATIC_DNS %q: %v", d, err)
		}
		n.DNS = append(n.DNS, a)
	}
	if err := n.Validate(); err != nil {
		t.Fatalf("VSPHERE_TEST_STATIC_*: %v", err)
	}
	return &n
}
