package config

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// installID is read and checked; each entry's Owner, "<installID>-<name>",
// must fit a mark, and Build gives every entry its Owner.
func TestInstallIDAndOwners(t *testing.T) {
	cfg, err := Parse([]byte(`
installID: c0ffee12
providers:
  - {name: lab, type: memory, memory: {endpoint: x}}
  - {name: prod, type: memory, memory: {endpoint: two}}
`), registry())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.InstallID != "c0ffee12" {
		t.Errorf("installID %q, want c0ffee12", cfg.InstallID)
	}
	set, err := Build(cfg, registry(), noop.NewTracerProvider())
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"lab": "c0ffee12-lab", "prod": "c0ffee12-prod"} {
		if e, ok := set.Get(name); !ok || e.Owner != want {
			t.Errorf("entry %s: owner %q, want %q", name, e.Owner, want)
		}
	}
}

func TestInstallIDAndOwnerProblemsNameTheValue(t *testing.T) {
	long := strings.Repeat("a", 55) // 8 + 1 + 55 = 64 with the default install ID
	for _, tc := range []struct {
		doc  string
		want []string
	}{
		{"installID: Prod-1\nproviders: [{name: lab, type: memory, memory: {endpoint: x}}]",
			[]string{`installID "Prod-1": lowercase letters and digits only, 1 to 16 characters`}},
		{"installID: abcdefghijklmnopq\nproviders: [{name: lab, type: memory, memory: {endpoint: x}}]",
			[]string{`installID "abcdefghijklmnopq"`}},
		{"providers: [{name: " + long + ", type: memory, memory: {endpoint: x}}]",
			[]string{`providers[0].name "` + long + `": its owner mark "<install ID, 8 characters by default>-` + long + `" is 64 characters, more than the 63 a mark holds`}},
		{"installID: abcdefghijklmnop\nproviders: [{name: ok, type: memory, memory: {endpoint: x}}, {name: " + strings.Repeat("b", 47) + ", type: memory, memory: {endpoint: x}}]",
			[]string{`providers[1].name "` + strings.Repeat("b", 47) + `": its owner mark "abcdefghijklmnop-` + strings.Repeat("b", 47) + `" is 64 characters, more than the 63`}},
	} {
		_, err := Parse([]byte(tc.doc), registry())
		for _, want := range tc.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s:\n error %v\n want it to say %q", tc.doc, err, want)
			}
		}
	}
	// At the bounds: 16 characters of install ID, and an owner of 63.
	if _, err := Parse([]byte("installID: abcdefghijklmnop\nproviders: [{name: "+strings.Repeat("b", 46)+", type: memory, memory: {endpoint: x}}]"), registry()); err != nil {
		t.Errorf("an owner of exactly 63 characters was refused: %v", err)
	}
	if _, err := Parse([]byte("providers: [{name: "+strings.Repeat("a", 54)+", type: memory, memory: {endpoint: x}}]"), registry()); err != nil {
		t.Errorf("an owner of exactly 63 characters under the default install ID was refused: %v", err)
	}
}

// Build needs the install ID resolved: an empty one is a caller's mistake
// that would make every Owner start with '-'.
func TestBuildRefusesAMissingInstallID(t *testing.T) {
	cfg, err := Parse([]byte("providers: [{name: lab, type: memory, memory: {endpoint: x}}]"), registry())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Build(cfg, registry(), noop.NewTracerProvider()); err == nil || !strings.Contains(err.Error(), `installID ""`) {
		t.Errorf("Build without an install ID: %v", err)
	}
}

// keeper is a provider whose config keeps egress addresses.
type keeper struct{ contract.Provider }

func (keeper) KeepsEgress() bool { return true }
func (keeper) ListEgress(context.Context, string) ([]contract.Egress, error) {
	return nil, nil
}
func (keeper) ReleaseEgress(context.Context, contract.Egress) error { return nil }

// An entry whose provider keeps an egress address per replica is built,
// and answers for it through its wrappers: the operator releases the
// addresses (docs/openstack-provider.md, "Floating IPs").
func TestBuildKeepsAProviderThatKeepsEgress(t *testing.T) {
	reg := registry()
	reg.Register(providers.Typed("openstack", func(testBlock) error { return nil },
		func(testBlock) (contract.Provider, error) { return keeper{}, nil }))
	cfg, err := Parse([]byte("installID: c0ffee12\nproviders: [{name: os, type: openstack, openstack: {endpoint: x}}]"), reg)
	if err != nil {
		t.Fatal(err)
	}
	set, err := Build(cfg, reg, noop.NewTracerProvider())
	if err != nil {
		t.Fatalf("Build = %v", err)
	}
	if k, ok := set.All()[0].Provider.(contract.EgressKeeper); !ok || !k.KeepsEgress() {
		t.Errorf("the built entry does not keep egress addresses (%T)", set.All()[0].Provider)
	}
}
