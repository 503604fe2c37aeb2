package pvefake

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

const (
	tTokenID = "egress@pve!operator"
	tSecret  = "secret"
)

func newTestServer(t *testing.T, version int, acl []ACE) *Server {
	t.Helper()
	s := New(Options{
		Nodes:     []string{"pve1"},
		Storages:  []StorageSpec{{Name: "local", Type: "dir", Content: []string{"iso"}}, {Name: "local-lvm", Type: "lvmthin", Content: []string{"images"}}},
		Templates: []Template{{VMID: 9000, Name: "tmpl", Node: "pve1"}},
		TokenID:   tTokenID, Secret: tSecret, Version: version, ACL: acl,
	})
	t.Cleanup(s.Close)
	return s
}

// answer is one reply as a client sees it: status, reason and errors.
type answer struct {
	status int
	reason string
	errors map[string]string
	data   json.RawMessage
}

func call(t *testing.T, s *Server, method, path string, form url.Values) answer {
	t.Helper()
	var body io.Reader
	u := s.BaseURL() + path
	if method == http.MethodGet || method == http.MethodDelete {
		if len(form) > 0 {
			u += "?" + form.Encode()
		}
	} else {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(t.Context(), method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Authorization", "PVEAPIToken="+tTokenID+"="+tSecret)
	res, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	var out struct {
		Data   json.RawMessage   `json:"data"`
		Errors map[string]string `json:"errors"`
	}
	_ = json.NewDecoder(res.Body).Decode(&out)
	return answer{status: res.StatusCode, reason: strings.TrimSpace(strings.TrimPrefix(res.Status, res.Status[:3])), errors: out.Errors, data: out.Data}
}

// TestSchemaRefusals: the fake refuses what PVE's schema refuses, with
// PVE's 400 "Parameter verification failed." and the per-parameter
// message of pve-common's JSONSchema.pm, on both versions.
func TestSchemaRefusals(t *testing.T) {
	cases := []struct {
		name, method, path string
		form               url.Values
		field, msg         string
	}{
		{"unknown parameter", "PUT", "/nodes/pve1/qemu/9000/config", url.Values{"bogus": {"1"}},
			"bogus", "property is not defined in schema and the schema does not allow additional properties"},
		{"bad pve-vmid in the path", "GET", "/nodes/pve1/qemu/99/status/current", nil,
			"vmid", "invalid format - value does not look like a valid VM ID\n"},
		{"vmid not an integer", "GET", "/nodes/pve1/qemu/abc/status/current", nil,
			"vmid", "type check ('integer') failed - got 'abc'"},
		{"bad tag", "PUT", "/nodes/pve1/qemu/9000/config", url.Values{"tags": {"ok;-bad"}},
			"tags", "invalid format - invalid characters in tag\n"},
		{"bad dns-name", "POST", "/nodes/pve1/qemu/9000/clone", url.Values{"newid": {"1000"}, "name": {"not_a_name"}},
			"name", "invalid format - value does not look like a valid DNS name\n"},
		{"missing required", "POST", "/nodes/pve1/qemu/9000/clone", url.Values{"name": {"a"}},
			"newid", "property is missing and it is not optional"},
		{"out of range", "PUT", "/nodes/pve1/qemu/9000/config", url.Values{"cores": {"0"}},
			"cores", "value must have a minimum value of 1"},
		{"newid above the maximum", "POST", "/nodes/pve1/qemu/9000/clone", url.Values{"newid": {"1000000000"}},
			"newid", "invalid format - value does not look like a valid VM ID\n"},
		{"enum", "GET", "/cluster/resources", url.Values{"type": {"disk"}},
			"type", "value 'disk' does not have a value in the enumeration 'vm, storage, node, sdn'"},
		{"property string key", "PUT", "/nodes/pve1/qemu/9000/config", url.Values{"ide2": {"local:iso/a.iso,media=floppy"}},
			"ide2", "invalid format - format error\nide2.media: value 'floppy' does not have a value in the enumeration 'cdrom, disk'\n"},
		{"memory below the minimum", "PUT", "/nodes/pve1/qemu/9000/config", url.Values{"memory": {"8"}},
			"memory", "invalid format - format error\nmemory.current: value must have a minimum value of 16\n"},
		{"index beyond the schema's", "PUT", "/nodes/pve1/qemu/9000/config", url.Values{"ide4": {"none"}},
			"ide4", "property is not defined in schema and the schema does not allow additional properties"},
		// pve-qm-ipconfig (qemu-server $ipconfig_fmt): ip is
		// pve-ipv4-config, a CIDR of /8 to /32 (pve-common
		// pve_verify_cidrv4), gw an ipv4 that requires ip.
		{"ipconfig prefix /33", "PUT", "/nodes/pve1/qemu/9000/config", url.Values{"ipconfig0": {"ip=192.0.2.10/33,gw=192.0.2.1"}},
			"ipconfig0", "invalid format - format error\nipconfig0.ip: invalid format - value does not look like a valid ipv4 network configuration\n\n"},
		{"ipconfig without a prefix", "PUT", "/nodes/pve1/qemu/9000/config", url.Values{"ipconfig0": {"ip=192.0.2.10"}},
			"ipconfig0", "invalid format - format error\nipconfig0.ip: invalid format - value does not look like a valid ipv4 network configuration\n\n"},
		{"ipconfig bad gateway", "PUT", "/nodes/pve1/qemu/9000/config", url.Values{"ipconfig0": {"ip=192.0.2.10/24,gw=192.0.2.256"}},
			"ipconfig0", "invalid format - format error\nipconfig0.gw: invalid format - value does not look like a valid IPv4 address\n\n"},
		{"ipconfig gateway without ip", "PUT", "/nodes/pve1/qemu/9000/config", url.Values{"ipconfig0": {"gw=192.0.2.1"}},
			"ipconfig0", "invalid format - format error\nipconfig0.ip: missing property required by 'ipconfig0.gw'\n"},
		{"ipconfig unknown key", "PUT", "/nodes/pve1/qemu/9000/config", url.Values{"ipconfig1": {"ip=dhcp,dns=192.0.2.53"}},
			"ipconfig1", "invalid format - invalid key in comma-separated list property: dns\n"},
		{"ipconfig bare value", "PUT", "/nodes/pve1/qemu/9000/config", url.Values{"ipconfig0": {"192.0.2.10/24"}},
			"ipconfig0", "invalid format - value without key, but schema does not define a default key\n"},
		// nameserver is address-list: split_list, each item an IP or a
		// DNS name (pve-common pve_verify_address).
		{"nameserver not an address", "PUT", "/nodes/pve1/qemu/9000/config", url.Values{"nameserver": {"192.0.2.53 not_an_address"}},
			"nameserver", "invalid format - value does not look like a valid address: not_an_address\n"},
	}
	for _, version := range []int{8, 9} {
		s := newTestServer(t, version, nil)
		for _, c := range cases {
			a := call(t, s, c.method, c.path, c.form)
			if a.status != 400 || a.reason != "Parameter verification failed." || a.errors[c.field] != c.msg {
				t.Errorf("PVE %d, %s: got %d %q %q, want 400 \"Parameter verification failed.\" with %s: %q", version, c.name, a.status, a.reason, a.errors, c.field, c.msg)
			}
		}
	}
}

// TestCloudInitNetworkAccepted: the static network the provider writes,
// as PVE takes it (qemu-server $ipconfig_fmt; nameserver address-list),
// on both versions: IPv4 and IPv6, dhcp, and several resolvers.
func TestCloudInitNetworkAccepted(t *testing.T) {
	for _, version := range []int{8, 9} {
		s := newTestServer(t, version, nil)
		for _, form := range []url.Values{
			{"ipconfig0": {"ip=192.0.2.10/24,gw=192.0.2.1"}, "nameserver": {"192.0.2.53 2001:db8::53 dns.example"}},
			{"ipconfig0": {"ip=dhcp,ip6=auto"}},
			{"ipconfig31": {"ip=10.0.0.5/8,gw=10.0.0.1,ip6=2001:db8::5/64,gw6=2001:db8::1"}},
		} {
			if a := call(t, s, "PUT", "/nodes/pve1/qemu/9000/config", form); a.status != 200 {
				t.Errorf("PVE %d, %v: got %d %q %q, want 200", version, form, a.status, a.reason, a.errors)
			}
		}
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// TestEveryFormatIsCheckedOrListed: each named format the pinned
// schemas' endpoints use is either ported (formats) or listed as accepted
// unchecked (uncheckedFormats), and no listed one is ported too.
func TestEveryFormatIsCheckedOrListed(t *testing.T) {
	for version, s := range schemas {
		for _, f := range s.Formats {
			if formats[f] == nil && hashFormats[f] == nil && !uncheckedFormats[f] {
				t.Errorf("PVE %d: format %q is neither checked nor listed in uncheckedFormats", version, f)
			}
			if (formats[f] != nil || hashFormats[f] != nil) && uncheckedFormats[f] {
				t.Errorf("format %q is checked and listed as unchecked", f)
			}
		}
	}
}
