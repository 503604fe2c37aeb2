package cloudinit

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// cloudConfig is the part of a #cloud-config the tests read back.
type cloudConfig struct {
	Hostname   string   `yaml:"hostname"`
	Packages   []string `yaml:"packages"`
	WriteFiles []struct {
		Path        string `yaml:"path"`
		Permissions string `yaml:"permissions"`
		Content     string `yaml:"content"`
	} `yaml:"write_files"`
	Runcmd [][]string `yaml:"runcmd"`
}

func parse(t *testing.T, out []byte) cloudConfig {
	t.Helper()
	if !strings.HasPrefix(string(out), "#cloud-config\n") {
		t.Fatalf("not a cloud-config: %.40q", out)
	}
	var doc cloudConfig
	dec := yaml.NewDecoder(bytes.NewReader(out))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("does not parse back: %v\n%s", err, out)
	}
	return doc
}

func TestRenderTinyproxy(t *testing.T) {
	out, err := Render(Proxy{Hostname: "web-1a2b", Port: 8888, AllowedClients: []string{"10.0.0.0/8", "192.168.10.0/24"},
		Upstream: "corp-proxy.example:3128", NoUpstream: []string{".internal.example"}})
	if err != nil {
		t.Fatal(err)
	}
	doc := parse(t, out)
	paths := []string{}
	for _, f := range doc.WriteFiles {
		paths = append(paths, f.Path)
	}
	if want := []string{"/etc/tinyproxy/tinyproxy.conf", statsPath, refusalsScriptPath, refusalsUnitPath, "/etc/systemd/journald.conf.d/egress-proxies.conf"}; doc.Hostname != "web-1a2b" || len(doc.Packages) != 0 || !slices.Equal(paths, want) {
		t.Fatalf("parsed back %+v; want the files %v", doc, want)
	}
	conf := doc.WriteFiles[0].Content
	for _, want := range []string{"Port 8888\n", "Allow 10.0.0.0/8\n", "Allow 192.168.10.0/24\n",
		"Upstream http corp-proxy.example:3128\n", "Upstream none \".internal.example\"\n",
		"StatHost \"" + StatsHost + "\"\n", "StatFile \"" + statsPath + "\"\n"} {
		if !strings.Contains(conf, want) {
			t.Errorf("tinyproxy.conf lacks %q:\n%s", want, conf)
		}
	}
	if strings.Count(conf, "Allow ") != 2 {
		t.Errorf("tinyproxy.conf allows more than the two client networks:\n%s", conf)
	}
}

func TestRenderSquid(t *testing.T) {
	out, err := Render(Proxy{Hostname: "web", Port: 3128, AllowedClients: []string{"10.244.0.0/16"}, Server: Squid, Upstream: "10.1.1.1:8080"})
	if err != nil {
		t.Fatal(err)
	}
	doc := parse(t, out)
	conf := doc.WriteFiles[0].Content
	for _, want := range []string{"http_port 3128\n", "acl egress_clients src 10.244.0.0/16\n",
		"http_access allow egress_clients\nhttp_access deny all\n", "cache_peer 10.1.1.1 parent 8080 0 no-query default\n", "never_direct allow all\n"} {
		if !strings.Contains(conf, want) {
			t.Errorf("squid.conf lacks %q:\n%s", want, conf)
		}
	}
	if len(doc.WriteFiles) != 1 || doc.WriteFiles[0].Path != "/etc/squid/squid.conf" {
		t.Errorf("squid config at %s: it must replace Debian's squid.conf, whose rules allow every private network", doc.WriteFiles[0].Path)
	}
}

func TestRenderRefusesBadInput(t *testing.T) {
	good := Proxy{Hostname: "web", Port: 3128, AllowedClients: []string{"10.0.0.0/8"}}
	for _, tc := range []struct {
		field  string
		mutate func(*Proxy)
	}{
		{"allowedClients", func(p *Proxy) { p.AllowedClients = nil }},
		{"allowedClients", func(p *Proxy) { p.AllowedClients = []string{"0.0.0.0/0"} }},
		{"allowedClients", func(p *Proxy) { p.AllowedClients = []string{"10.0.0.0/8", "::/0"} }},
		{"allowedClients", func(p *Proxy) { p.AllowedClients = []string{"not-a-cidr"} }},
		{"hostname", func(p *Proxy) { p.Hostname = "Web_1\nruncmd: [reboot]" }},
		{"port", func(p *Proxy) { p.Port = 0 }},
		{"server", func(p *Proxy) { p.Server = "nginx" }},
		{"upstream", func(p *Proxy) { p.Upstream = "corp-proxy" }},
		{"noUpstream", func(p *Proxy) { p.Upstream, p.NoUpstream = "a.example:3128", []string{"x\" evil"} }},
	} {
		p := good
		tc.mutate(&p)
		_, err := Render(p)
		var fe *contract.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: Render = %v, want an error naming the field", tc.field, err)
		}
	}
}
