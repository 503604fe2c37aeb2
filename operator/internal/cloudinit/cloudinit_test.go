package cloudinit

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestRenderIsValidCloudConfig(t *testing.T) {
	out, err := Render(Proxy{Hostname: "web-1a2b", Port: 8888, AllowedClients: []string{"10.0.0.0/8", "192.168.10.0/24"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "#cloud-config\n") {
		t.Fatalf("not a cloud-config: %q", out[:20])
	}
	var doc struct {
		Hostname   string `json:"hostname"`
		WriteFiles []struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		} `json:"write_files"`
	}
	if err := yaml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("does not parse back as YAML: %v\n%s", err, out)
	}
	if doc.Hostname != "web-1a2b" || len(doc.WriteFiles) != 1 {
		t.Fatalf("parsed back %+v", doc)
	}
	conf := doc.WriteFiles[0].Content
	for _, want := range []string{"Port 8888\n", "Allow 10.0.0.0/8\n", "Allow 192.168.10.0/24\n"} {
		if !strings.Contains(conf, want) {
			t.Errorf("tinyproxy.conf lacks %q:\n%s", want, conf)
		}
	}
}

func TestRenderRefusesAnOpenProxy(t *testing.T) {
	for _, clients := range [][]string{nil, {"0.0.0.0/0"}, {"10.0.0.0/8", "::/0"}, {"not-a-cidr"}} {
		if _, err := Render(Proxy{Hostname: "x", Port: 3128, AllowedClients: clients}); err == nil {
			t.Errorf("rendered a proxy allowing %v", clients)
		}
	}
}
