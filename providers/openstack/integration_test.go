package openstack

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

// TestIntegration runs one real lifecycle against the cloud named by the
// OPENSTACK_TEST_* variables (make test-integration-openstack): a server
// boots from the image, runs with an address, is found by its marks, and
// is deleted. Without the variables it is skipped, saying which are
// missing.
func TestIntegration(t *testing.T) {
	p, err := New(integrationConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range p.Check(context.Background()) {
		t.Logf("check %s: %s %s", r.Target, r.Reason, r.Message)
	}
	// The probe connects to the proxy port. A cloud whose compute runs no
	// guest (the local lane's Nova FakeDriver: servers go ACTIVE with a
	// Neutron address and nothing behind it) sets OPENSTACK_TEST_NO_GUEST,
	// and the lifecycle runs without it: nothing could answer.
	probe := func(ctx context.Context, ip string) error {
		conn, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", net.JoinHostPort(ip, "3128"))
		if err == nil {
			_ = conn.Close()
		}
		return err
	}
	if os.Getenv("OPENSTACK_TEST_NO_GUEST") != "" {
		t.Log("OPENSTACK_TEST_NO_GUEST is set: the compute runs no guest, the proxy port is not probed")
		probe = nil
	}
	name := fmt.Sprintf("egress-it-%d", time.Now().Unix()%1000000)
	contracttest.RunLifecycle(t, contracttest.Lifecycle{
		Provider: p,
		Request: contract.CreateRequest{
			Name: name, UID: "0e9d6c1a-7f3b-4d2e-9a5c-integration01", Owner: "integration-test", Port: 3128,
			Placement: contract.Placement{Region: "test", Zone: "test", MachineType: "small", Image: "proxy"},
			CloudInit: []byte("#cloud-config\nhostname: " + name + "\n"),
		},
		Timeout: 15 * time.Minute,
		Probe:   probe,
	})
}

// integrationConfig is the config of the cloud the OPENSTACK_TEST_*
// variables name: region "test" with its one zone "test", machine type
// "small" and image "proxy". The test is skipped, saying which variables
// are missing, without them.
func integrationConfig(t *testing.T) Config {
	t.Helper()
	vars := contracttest.RequireEnv(t, "real cloud", "OPENSTACK_TEST_", []string{"CLOUDS_FILE", "REGION", "ZONE", "NETWORK", "FLAVOR", "IMAGE"},
		"OPENSTACK_TEST_CLOUD", "OPENSTACK_TEST_CA_FILE", "OPENSTACK_TEST_SECURITY_GROUP", "OPENSTACK_TEST_NO_GUEST")
	var groups []string
	if g := os.Getenv("OPENSTACK_TEST_SECURITY_GROUP"); g != "" {
		groups = []string{g}
	}
	return Config{
		CloudsFile: vars["CLOUDS_FILE"], Cloud: os.Getenv("OPENSTACK_TEST_CLOUD"), CAFile: os.Getenv("OPENSTACK_TEST_CA_FILE"),
		Regions: map[string]Region{"test": {Name: vars["REGION"], Network: vars["NETWORK"], SecurityGroups: groups,
			Zones: map[string]string{"test": vars["ZONE"]}}},
		MachineTypes: map[string]string{"small": vars["FLAVOR"]},
		Images:       map[string]string{"proxy": vars["IMAGE"]},
	}
}
