package openstack

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

func TestConfigValidateListsEveryProblem(t *testing.T) {
	err := Config{
		Interface:             "private",
		CAFile:                "/ca.pem",
		InsecureSkipTLSVerify: true,
		Regions: map[string]Region{
			"EU_1": {Name: "RegionOne", Network: "8b2a3c4d-1e2f-4a5b-9c8d-7e6f5a4b3c2d", Zones: map[string]string{"a": "nova"}},
			"eu-2": {Name: "Region;Two", Network: "private-net", Zones: nil, SecurityGroups: []string{"proxy/in"},
				FloatingIPs: &FloatingIPs{Network: "public", Addresses: []string{"203.0.113.7", "2001:db8::7", "203.0.113.7"}}},
		},
		MachineTypes:  map[string]string{"small": ""},
		Images:        map[string]string{"debian": "debian 12 | latest"},
		CreateTimeout: contract.Duration{Duration: -time.Second},
	}.Validate()
	if err == nil {
		t.Fatal("an invalid config was accepted")
	}
	for _, want := range []string{
		"cloudsFile: required",
		`interface "private": want public, internal or admin`,
		"caFile and insecureSkipTLSVerify: set one, not both",
		`regions["EU_1"]: a region key must match`,
		`regions["eu-2"].name "Region;Two"`,
		`regions["eu-2"].network "private-net": want a network's ID`,
		`regions["eu-2"].zones: at least one is required`,
		`regions["eu-2"].securityGroups: "proxy/in"`,
		`regions["eu-2"].floatingIPs.network "public": want an external network's ID`,
		`regions["eu-2"].floatingIPs.addresses[1] "2001:db8::7": want an IPv4 address`,
		`regions["eu-2"].floatingIPs.addresses[2] "203.0.113.7": listed twice`,
		`machineTypes["small"] ""`,
		`images["debian"] "debian 12 | latest"`,
		"createTimeout -1s: must not be negative",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not report %q:\n%v", want, err)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	var c Config
	if err := json.Unmarshal([]byte(`{"callTimeout": "45s"}`), &c); err != nil {
		t.Fatal(err)
	}
	c = c.withDefaults()
	if c.CallTimeout.Duration != 45*time.Second || c.Cloud != "openstack" || c.Interface != "public" {
		t.Errorf("defaults: %+v", c)
	}
	if err := json.Unmarshal([]byte(`{"callTimeout": 30}`), &c); err == nil {
		t.Error("a bare number was accepted as a duration")
	}
}

// New validates and returns without reading the clouds file or calling
// the cloud (contract §7).
func TestNewNeverDials(t *testing.T) {
	c := startCloud(t)
	before := c.fake.Calls()
	cfg := c.cfg
	cfg.CloudsFile = "/nonexistent/clouds.yaml"
	if _, err := New(cfg); err != nil {
		t.Fatal(err)
	}
	if after := c.fake.Calls(); after != before {
		t.Errorf("New made %d calls", after-before)
	}
}

// A clouds file that cannot be used names the file and the problem, and
// never quotes its content.
func TestCloudsFileErrors(t *testing.T) {
	for name, content := range map[string]string{
		"no cloud openstack":   "clouds:\n  other:\n    auth:\n      auth_url: https://k/v3\n      password: hunter2-secret\n",
		"line 3":               "clouds:\n  openstack:\n    auth: [hunter2-secret\n",
		"has no auth.auth_url": "clouds:\n  openstack:\n    auth:\n      password: hunter2-secret\n",
		"neither application_credential_secret nor password": "clouds:\n  openstack:\n    auth:\n      auth_url: https://k/v3\n",
	} {
		_, err := parseClouds(content, "openstack", "/etc/egress-proxies/openstack/clouds.yaml")
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "/etc/egress-proxies/openstack/clouds.yaml") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
