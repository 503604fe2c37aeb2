package config

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// testBlock is a provider block with one required field.
type testBlock struct {
	Endpoint string `json:"endpoint"`
}

func registry() providers.Registry {
	reg := providers.Registry{}
	reg.Register(providers.Typed("memory",
		func(b testBlock) error {
			if b.Endpoint == "" {
				return errors.New("endpoint: required")
			}
			return nil
		},
		func(testBlock) (contract.Provider, error) { return nil, nil }))
	return reg
}

func TestParseAppliesDefaults(t *testing.T) {
	cfg, err := Parse([]byte(`
providers:
  - name: dev
    type: memory
    memory: {endpoint: "in-process"}
defaultAllowedClients: ["10.0.0.0/8"]
`), registry())
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Providers[0]
	if p.GC.MinAge != contract.DefaultMinAge || p.GC.Interval != DefaultGCInterval || p.CheckInterval != DefaultCheckInterval ||
		p.Limits != (providers.Limits{QPS: DefaultQPS, Burst: DefaultBurst, Concurrency: DefaultConcurrency}) {
		t.Errorf("defaults not applied: %+v", p)
	}
	var block testBlock
	if err := json.Unmarshal(p.Block, &block); err != nil || block.Endpoint != "in-process" {
		t.Errorf("block %s: %v", p.Block, err)
	}
}

func TestParseReadsEveryField(t *testing.T) {
	cfg, err := Parse([]byte(`
providers:
  - name: dev
    type: memory
    memory: {endpoint: x}
    gc: {minAge: 30m, interval: 1m}
    limits: {qps: 2.5, burst: 4, concurrency: 2}
    checkInterval: 2m
    allowedNamespaces: {matchLabels: {team: a}, matchExpressions: [{key: tier, operator: In, values: [prod]}]}
`), registry())
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Providers[0]
	if p.GC != (providers.GC{MinAge: 30 * time.Minute, Interval: time.Minute}) || p.Limits != (providers.Limits{QPS: 2.5, Burst: 4, Concurrency: 2}) || p.CheckInterval != 2*time.Minute {
		t.Errorf("parsed %+v", p)
	}
	if p.AllowedNamespaces == nil || p.AllowedNamespaces.String() != "team=a,tier in (prod)" {
		t.Errorf("allowedNamespaces parsed as %v", p.AllowedNamespaces)
	}
	if cfg, err := Parse([]byte("providers: [{name: dev, type: memory, memory: {endpoint: x}}]"), registry()); err != nil || cfg.Providers[0].AllowedNamespaces != nil {
		t.Errorf("without allowedNamespaces: %v, %v; want every namespace (nil)", cfg.Providers[0].AllowedNamespaces, err)
	}
}

// An invalid file fails with every problem at once, each naming the field
// and the value.
func TestParseListsEveryProblem(t *testing.T) {
	_, err := Parse([]byte(`
providers:
  - name: Dev_1
    type: memory
    memory: {}
    openstack: {}
    gc: {minAge: 10s, interval: 1s}
    limits: {qps: 0}
    allowedNamespaces: {matchExpressions: [{key: team, operator: Near, values: [a]}]}
  - name: dev2
    type: vsphere
    vsphere: {}
  - name: dev2
    type: nimbus
  - name: dev4
    type: memory
  - name: dev5
    type: memory
    memory: {endpoint: x, color: blue}
defaultAllowedClients: ["0.0.0.0/0", "nope", "0.0.0.0/1", "fd00::/8", "192.168.0.0/16"]
allowedClientsWithin: ["10.0.0.0/8", "fd00::/8", "bad"]
`), registry())
	if err == nil {
		t.Fatal("an invalid config was accepted")
	}
	for _, want := range []string{
		`providers[0].name "Dev_1": must be a DNS-1123 label`,
		`providers[0].memory: endpoint: required`,
		`providers[0].openstack: not a field of a provider of type "memory"`,
		`providers[0].gc.minAge "10s": at least 1m`,
		`providers[0].gc.interval "1s": at least 10s`,
		`providers[0].limits {qps: 0, burst: 10, concurrency: 4}: each must be positive`,
		`providers[0].allowedNamespaces: "Near" is not a valid label selector operator`,
		`providers[1].type "vsphere": not compiled into this operator (compiled in: memory); build with -tags "vsphere"`,
		`providers[2].type "nimbus": unknown; one of libvirt, memory, openstack, proxmox, vsphere`,
		`providers[3].memory: the block for type "memory" is missing`,
		`providers[4].memory: unknown field "color" (line 19)`,
		`defaultAllowedClients[0] "0.0.0.0/0"`,
		`defaultAllowedClients[1] "nope"`,
		`defaultAllowedClients[2] "0.0.0.0/1": an IPv4 network must be /8 or longer`,
		`defaultAllowedClients[4] "192.168.0.0/16": outside allowedClientsWithin`,
		`allowedClientsWithin[2] "bad": want a CIDR`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not report %q; it says:\n%v", want, err)
		}
	}
}

func TestParseRejectsDuplicateNamesAndUnknownKeys(t *testing.T) {
	_, err := Parse([]byte(`
providers:
  - {name: a, type: memory, memory: {endpoint: x}}
  - {name: a, type: memory, memory: {endpoint: two}}
extra: true
`), registry())
	if err == nil || !strings.Contains(err.Error(), `unknown field "extra"`) {
		t.Errorf("unknown top-level key: %v", err)
	}
	_, err = Parse([]byte(`
providers:
  - {name: a, type: memory, memory: {endpoint: x}}
  - {name: a, type: memory, memory: {endpoint: two}}
`), registry())
	if err == nil || !strings.Contains(err.Error(), `providers[1].name "a": already used by providers[0]`) {
		t.Errorf("duplicate name: %v", err)
	}
}

// A config naming no provider is valid: the shipped one comments every
// entry out, so an operator built with any set of types starts with it
// (its Proxies wait with ProviderNotConfigured).
func TestParseAcceptsNoProviders(t *testing.T) {
	for _, doc := range []string{
		"providers: []\n",
		"defaultAllowedClients: [\"10.0.0.0/8\"]\nproviders:\n  # - name: lab\n  #   type: memory\n",
	} {
		cfg, err := Parse([]byte(doc), registry())
		if err != nil {
			t.Errorf("%q: %v", doc, err)
			continue
		}
		if len(cfg.Providers) != 0 {
			t.Errorf("%q: parsed providers %+v", doc, cfg.Providers)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("providers:\n  - {name: a, type: memory, memory: {endpoint: x}}\n"))
	f.Add([]byte("providers: [{gc: {minAge: -1h}}]"))
	reg := registry()
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, reg)
		if err != nil {
			return
		}
		for i, p := range cfg.Providers {
			if _, compiled := reg[p.Type]; !nameRE.MatchString(p.Name) || !compiled {
				t.Fatalf("providers[%d] accepted with name %q, type %q", i, p.Name, p.Type)
			}
		}
	})
}

// The providers config is read as the API server reads objects: a key in
// the wrong case, an unknown key or a key given twice is refused, naming
// the key and its line, at every level — the top, a provider entry's
// settings and the provider's own block (a regression: installid and
// installId were taken as installID, and a duplicate silently took the
// last value).
func TestParseIsStrictAboutKeys(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"top-level key in the wrong case", `
installid: abcdef
providers: []
`, []string{`unknown field "installid"`, "line 2"}},
		{"camel case not as documented", `
providers: []
installId: abcdef
`, []string{`unknown field "installId"`, "line 3"}},
		{"duplicate top-level key", `
installID: first
providers: []
installID: second
`, []string{`"installID"`, "line 4"}},
		{"duplicate key in a provider block", `
providers:
  - name: a
    type: memory
    memory:
      endpoint: one
      endpoint: two
`, []string{`"endpoint"`, "line 7"}},
		{"provider block key in the wrong case", `
providers:
  - name: a
    type: memory
    memory:
      Endpoint: x
`, []string{`providers[0].memory`, `unknown field "Endpoint"`, "line 6"}},
		{"gc key in the wrong case", `
providers:
  - name: a
    type: memory
    memory: {endpoint: x}
    gc:
      minage: 30m
`, []string{`providers[0].gc`, `unknown field "minage"`, "line 7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), registry())
			if err == nil {
				t.Fatalf("accepted:%s", tc.doc)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
