package vsphere

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

func TestConfigValidateListsEveryProblem(t *testing.T) {
	err := Config{
		Server:                "http://vcenter.example/sdk",
		UsernameFile:          "/etc/egress-proxies/credentials/user",
		CAFile:                "/ca.pem",
		InsecureSkipTLSVerify: true,
		Regions: map[string]Region{
			"EU_1": {Datacenter: "DC0", Folder: "/DC0/vm/egress", Zones: map[string]Zone{"z1": {ResourcePool: "rp", Datastore: "ds", Host: "esx;1"}}},
			"eu-2": {Datacenter: "DC0;rm", Folder: "", Zones: nil},
		},
		MachineTypes: map[string]MachineType{"tiny": {CPUs: 0, MemoryMiB: 128}},
	}.Validate()
	if err == nil {
		t.Fatal("an invalid config was accepted")
	}
	for _, want := range []string{
		`server "http://vcenter.example/sdk": want an https URL`,
		"usernameFile and passwordFile: both are required",
		"caFile and insecureSkipTLSVerify: set one, not both",
		`regions["EU_1"]: a region key must match`,
		`regions["eu-2"].datacenter "DC0;rm"`,
		`regions["eu-2"].folder ""`,
		`regions["eu-2"].zones: at least one is required`,
		`regions["EU_1"].zones["z1"].host "esx;1": want an inventory name or path`,
		`machineTypes["tiny"]: cpus 0, memoryMiB 128`,
		"images: at least one is required",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not report %q:\n%v", want, err)
		}
	}
}

func TestConfigDecodesDurations(t *testing.T) {
	var c Config
	if err := json.Unmarshal([]byte(`{"callTimeout": "45s", "taskTimeout": "15m"}`), &c); err != nil {
		t.Fatal(err)
	}
	if c.CallTimeout.Duration != 45*time.Second || c.TaskTimeout.Duration != 15*time.Minute {
		t.Errorf("decoded %v %v", c.CallTimeout, c.TaskTimeout)
	}
	if err := json.Unmarshal([]byte(`{"callTimeout": 30}`), &c); err == nil {
		t.Error("a bare number was accepted as a duration")
	}
}

// New validates and returns without a call to the server (contract §7).
func TestNewNeverDials(t *testing.T) {
	v := startVcsim(t)
	before := v.calls.Load()
	if _, err := New(v.cfg); err != nil {
		t.Fatal(err)
	}
	if after := v.calls.Load(); after != before {
		t.Errorf("New made %d calls", after-before)
	}
}

// A cloud-init larger than guestinfo carries is refused, naming the field,
// before any call (spec entry 24).
func TestCloudInitAboveLimitIsRefusedFirst(t *testing.T) {
	v := startVcsim(t)
	p := v.provider(t)
	before := v.calls.Load()
	_, err := p.Create(context.Background(), contract.CreateRequest{
		Name: "too-big", UID: "0b5c2b0e-7b8a-4f7e-9d1a-2c3d4e5f6a7b", Owner: testOwner, Port: 3128,
		Placement: contract.Placement{Region: "dc0", Zone: "c0", MachineType: "small", Image: "debian-12"},
		CloudInit: make([]byte, MaxCloudInit+1),
	})
	var fe *contract.FieldError
	if !errors.As(err, &fe) || fe.Field != "cloudInit" {
		t.Fatalf("Create with %d bytes of cloud-init: %v, want a field error naming cloudInit", MaxCloudInit+1, err)
	}
	if after := v.calls.Load(); after != before {
		t.Errorf("Create made %d calls before refusing", after-before)
	}
}

// The clone and storage options: each bad value named with its field.
func TestConfigValidatesCloneAndStorageOptions(t *testing.T) {
	base := func() Config {
		return Config{
			Server: "https://vcenter.example/sdk", UsernameFile: "/u", PasswordFile: "/p",
			Regions: map[string]Region{"dc1": {Datacenter: "DC1", Folder: "/DC1/vm/egress", Zones: map[string]Zone{
				"a": {ResourcePool: "/DC1/host/a/Resources", Datastore: "ds-a"},
			}}},
			MachineTypes: map[string]MachineType{"small": {CPUs: 1, MemoryMiB: 512}},
			Images:       map[string]string{"debian-12": "tmpl"},
		}
	}
	zone := func(edit func(*Zone)) Config {
		c := base()
		z := c.Regions["dc1"].Zones["a"]
		edit(&z)
		c.Regions["dc1"].Zones["a"] = z
		return c
	}
	if err := base().Validate(); err != nil {
		t.Fatalf("the base config: %v", err)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"unknown clone mode", func() Config { c := base(); c.CloneMode = "copy"; return c }(), `cloneMode "copy": want fullClone or linkedClone`},
		{"snapshot with a full clone", func() Config { c := base(); c.Snapshot = "base"; return c }(), `snapshot "base": only with cloneMode linkedClone`},
		{"bad snapshot name", func() Config { c := base(); c.CloneMode, c.Snapshot = linkedClone, "a;b"; return c }(), `snapshot "a;b": want a snapshot name or path`},
		{"datastore and cluster", zone(func(z *Zone) { z.DatastoreCluster = "pod" }), `regions["dc1"].zones["a"].datastore "ds-a" and regions["dc1"].zones["a"].datastoreCluster "pod": set exactly one`},
		{"neither datastore nor cluster", zone(func(z *Zone) { z.Datastore = "" }), `regions["dc1"].zones["a"].datastore "" and regions["dc1"].zones["a"].datastoreCluster "": set exactly one`},
		{"bad policy", zone(func(z *Zone) { z.StoragePolicyID = "gold" }), `regions["dc1"].zones["a"].storagePolicyID "gold": want a storage policy ID`},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.want)
		}
	}
	ok := base()
	ok.CloneMode = linkedClone
	z := ok.Regions["dc1"].Zones["a"]
	z.Datastore, z.DatastoreCluster, z.StoragePolicyID = "", "pod-a", "aa6d5a82-1c88-45da-85d3-3d74b91a5bad"
	ok.Regions["dc1"].Zones["a"] = z
	if err := ok.Validate(); err != nil {
		t.Errorf("a linked clone on a datastore cluster with a policy: %v", err)
	}
}
