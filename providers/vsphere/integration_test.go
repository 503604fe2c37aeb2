package vsphere

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

// TestIntegration runs one real lifecycle against a vCenter named by the
// VSPHERE_TEST_* variables (make test-integration-vsphere): a VM is cloned
// from the template, runs with an address, is found by its marks, and is
// destroyed. Without the variables it is skipped, saying which are missing.
func TestIntegration(t *testing.T) {
	vars := contracttest.RequireEnv(t, "real vCenter", "VSPHERE_TEST_", []string{"SERVER", "USERNAME_FILE", "PASSWORD_FILE", "DATACENTER", "FOLDER", "RESOURCE_POOL", "DATASTORE", "TEMPLATE"},
		"VSPHERE_TEST_NETWORK", "VSPHERE_TEST_CA_FILE")
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
