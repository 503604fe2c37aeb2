package cloudinit

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Every form a destination takes, as each server's configuration reads
// it. What the servers then do with it is TestDestinationPolicyOnRealServers.
func TestRenderDestinationForms(t *testing.T) {
	for _, tc := range []struct {
		dest      Destination
		tinyproxy []string // the filter's lines
		squid     []string // lines of squid.conf
	}{
		{Destination{Host: "api.partner.example", Ports: []int32{8443}},
			[]string{`^http://api\.partner\.example:8443(/|$)`, `^api\.partner\.example:8443$`},
			[]string{"acl egress_dst_0 dstdomain -n api.partner.example", "acl egress_ports_0 port 8443", "http_access allow egress_dst_0 egress_ports_0"}},
		{Destination{Host: "api.partner.example"},
			[]string{`^http://api\.partner\.example(:80)?(/|$)`, `^api\.partner\.example:443$`},
			[]string{"http_access allow egress_dst_0 !egress_connect egress_http_default", "http_access allow egress_dst_0 egress_connect egress_connect_default"}},
		{Destination{Host: "*.partner.example", Ports: []int32{80, 8080}},
			[]string{`^http://[^/:@]+\.partner\.example(:(80|8080))?(/|$)`, `^[^/:@]+\.partner\.example:(80|8080)$`},
			[]string{`acl egress_dst_0 dstdom_regex -n -i \.partner\.example$`, "acl egress_ports_0 port 80 8080"}},
		{Destination{Network: "203.0.113.7/32", Ports: []int32{443}},
			[]string{`^http://203\.0\.113\.7:443(/|$)`, `^203\.0\.113\.7:443$`},
			[]string{"acl egress_dst_0 dst 203.0.113.7/32"}},
		{Destination{Network: "203.0.112.0/23", Ports: []int32{443}},
			[]string{`^http://203\.0\.(112|113)\.` + anyOctet + `:443(/|$)`, `^203\.0\.(112|113)\.` + anyOctet + `:443$`},
			[]string{"acl egress_dst_0 dst 203.0.112.0/23"}},
		{Destination{Network: "10.0.0.0/8", Ports: []int32{443}},
			[]string{`^10\.` + anyOctet + `\.` + anyOctet + `\.` + anyOctet + `:443$`},
			[]string{"acl egress_dst_0 dst 10.0.0.0/8"}},
	} {
		t.Run(fmt.Sprint(tc.dest), func(t *testing.T) {
			p := Proxy{Hostname: "web", Port: 3128, AllowedClients: []string{"10.0.0.0/8"}, Destinations: []Destination{tc.dest}, Policy: "Proxy ns/web"}
			filter := files(t, p, Tinyproxy)[tinyproxyFilterPath]
			for _, want := range tc.tinyproxy {
				if !strings.Contains("\n"+filter, "\n"+want+"\n") {
					t.Errorf("filter lacks the line %s:\n%s", want, filter)
				}
				if _, err := regexp.Compile(want); err != nil {
					t.Errorf("line %s: %v", want, err)
				}
			}
			p.Server = Squid
			conf := files(t, p, Squid)["/etc/squid/squid.conf"]
			for _, want := range tc.squid {
				if !strings.Contains(conf, "\n"+want+"\n") {
					t.Errorf("squid.conf lacks the line %s:\n%s", want, conf)
				}
			}
		})
	}
}

// files renders p for server and returns its write_files by path.
func files(t *testing.T, p Proxy, server Server) map[string]string {
	t.Helper()
	p.Server = server
	out, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, f := range parse(t, out).WriteFiles {
		m[f.Path] = f.Content
	}
	return m
}

// A destination policy turns both servers to refuse by default, with the
// page naming the policy; without one, nothing of it is written and the
// configuration is what it was before destinations existed.
func TestRenderPolicyFrame(t *testing.T) {
	p := Proxy{Hostname: "web", Port: 3128, AllowedClients: []string{"10.0.0.0/8"},
		Destinations: []Destination{{Host: "api.partner.example"}}, Policy: "Proxy ns/web"}
	tiny := files(t, p, Tinyproxy)
	for _, want := range []string{"Filter \"" + tinyproxyFilterPath + "\"\n", "FilterURLs On\n", "FilterType ere\n", "FilterDefaultDeny Yes\n",
		"ErrorFile 403 \"" + tinyproxyRefusalPath + "\"\n"} {
		if !strings.Contains(tiny["/etc/tinyproxy/tinyproxy.conf"], want) {
			t.Errorf("tinyproxy.conf lacks %q", want)
		}
	}
	if page := tiny[tinyproxyRefusalPath]; !strings.Contains(page, "Refused by the egress policy of Proxy ns/web") || !strings.Contains(page, "{cause}") {
		t.Errorf("tinyproxy's refusal page: %q", page)
	}
	sq := files(t, p, Squid)
	conf := sq["/etc/squid/squid.conf"]
	// Clients first, then destinations, then the refusal with its page;
	// nothing lets every destination out.
	order := []string{"acl egress_clients src 10.0.0.0/8\n", "http_access deny !egress_clients\n", "http_access allow egress_dst_0 ",
		"deny_info ERR_EGRESS_POLICY egress_refused\n", "http_access deny egress_refused\n", "http_access deny all\n"}
	at := 0
	for _, want := range order {
		i := strings.Index(conf[at:], want)
		if i < 0 {
			t.Fatalf("squid.conf lacks %q after byte %d:\n%s", want, at, conf)
		}
		at += i + len(want)
	}
	if strings.Contains(conf, "http_access allow egress_clients\n") {
		t.Errorf("squid.conf lets every destination out:\n%s", conf)
	}
	if page := sq[squidRefusalPath]; !strings.Contains(page, "Refused by the egress policy of Proxy ns/web") || !strings.Contains(page, "%U") {
		t.Errorf("squid's refusal page: %q", page)
	}

	p.Destinations = nil
	for _, server := range []Server{Tinyproxy, Squid} {
		got := files(t, p, server)
		for _, traffic := range []string{statsPath, refusalsScriptPath, refusalsUnitPath, "/etc/systemd/journald.conf.d/egress-proxies.conf"} {
			delete(got, traffic)
		}
		if len(got) != 1 {
			t.Errorf("%s without destinations writes %d files besides the statistics page, its refusals counter and the journal's settings", server, len(got))
		}
		for _, c := range got {
			if strings.Contains(c, "Filter") || strings.Contains(c, "egress_dst") || strings.Contains(c, "egress_refused") {
				t.Errorf("%s without destinations has a policy:\n%s", server, c)
			}
		}
	}
}

// Whatever the destinations, each filter line fits tinyproxy's 512-byte
// line buffer, and together they match every value and port.
func TestTinyproxyFilterLinesFit(t *testing.T) {
	longest := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	ports := make([]int32, 16)
	for i := range ports {
		ports[i] = int32(60000 + i)
	}
	dests := []Destination{{Host: "*." + longest[2:], Ports: ports}, {Host: longest, Ports: ports}, {Network: "128.0.0.0/1", Ports: ports}}
	for _, d := range dests {
		if err := d.validate(0); err != nil {
			t.Fatal(err)
		}
	}
	filter := tinyproxyFilter(dests)
	lines := strings.Split(strings.TrimSuffix(filter, "\n"), "\n")
	for _, l := range lines {
		if len(l) > 510 { // fgets into 512 bytes: 510, the newline and the NUL
			t.Errorf("a line of %d bytes: %.80s...", len(l), l)
		}
	}
	if len(lines) <= 4 {
		t.Errorf("%d lines: the long ones were not split", len(lines))
	}
	for _, target := range []string{"http://" + longest + ":60015/", longest + ":60000", "http://x." + longest[2:] + ":60007/",
		"http://200.1.2.3:60015/", "255.255.255.255:60000"} {
		if !matchesAny(lines, target) {
			t.Errorf("no line matches %s", target)
		}
	}
	for _, target := range []string{"http://" + longest + ":60016/", "127.0.0.1:60000", "http://" + longest + "/"} {
		if matchesAny(lines, target) {
			t.Errorf("a line matches %s", target)
		}
	}
	for first := range 256 {
		for _, port := range ports {
			target := fmt.Sprintf("%d.1.2.3:%d", first, port)
			if matchesAny(lines, target) != (first >= 128) {
				t.Errorf("%s: matched %v, want %v (128.0.0.0/1)", target, first < 128, first >= 128)
			}
		}
	}
}

func matchesAny(lines []string, s string) bool {
	for _, l := range lines {
		re, ok := compiled.Load(l)
		if !ok {
			re, _ = compiled.LoadOrStore(l, regexp.MustCompile("(?i)"+l))
		}
		if re.(*regexp.Regexp).MatchString(s) {
			return true
		}
	}
	return false
}

// compiled holds the filter lines matchesAny compiled.
var compiled sync.Map

// Every bad destination is refused before anything is rendered, naming
// its field and value: nothing of it reaches a configuration, where a
// space, a quote or a newline would write a rule of its own.
func TestRenderRefusesBadDestinations(t *testing.T) {
	for _, tc := range []struct {
		dest  Destination
		field string
	}{
		{Destination{}, "egress.destinations[0].host"},
		{Destination{Host: "a.example", Network: "10.0.0.0/8"}, "egress.destinations[0].network"},
		{Destination{Host: "API.example"}, "egress.destinations[0].host"},
		{Destination{Host: "a.example\nhttp_access allow all"}, "egress.destinations[0].host"},
		{Destination{Host: "a.example all"}, "egress.destinations[0].host"},
		{Destination{Host: "*"}, "egress.destinations[0].host"},
		{Destination{Host: "*.*.example"}, "egress.destinations[0].host"},
		{Destination{Host: "a*.example"}, "egress.destinations[0].host"},
		{Destination{Host: "a.example."}, "egress.destinations[0].host"},
		{Destination{Host: "-a.example"}, "egress.destinations[0].host"},
		{Destination{Host: strings.Repeat("a", 64) + ".example"}, "egress.destinations[0].host"},
		{Destination{Host: strings.Repeat("abcdefg.", 32) + "example"}, "egress.destinations[0].host"},
		{Destination{Host: "203.0.113.7"}, "egress.destinations[0].host"},
		{Destination{Network: "203.0.113.7"}, "egress.destinations[0].network"},
		{Destination{Network: "203.0.113.7/24"}, "egress.destinations[0].network"},
		{Destination{Network: "0.0.0.0/0"}, "egress.destinations[0].network"},
		{Destination{Network: "2001:db8::/32"}, "egress.destinations[0].network"},
		{Destination{Host: "a.example", Ports: []int32{0}}, "egress.destinations[0].ports[0]"},
		{Destination{Host: "a.example", Ports: []int32{443, 65536}}, "egress.destinations[0].ports[1]"},
		{Destination{Host: "a.example", Ports: []int32{443, 443}}, "egress.destinations[0].ports[1]"},
	} {
		p := Proxy{Hostname: "web", Port: 3128, AllowedClients: []string{"10.0.0.0/8"}, Destinations: []Destination{tc.dest}}
		out, err := Render(p)
		var fe *contract.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, contract.ErrPermanent) {
			t.Errorf("%+v: Render = %v, want an error naming %s", tc.dest, err, tc.field)
			continue
		}
		if out != nil {
			t.Errorf("%+v: rendered despite the error", tc.dest)
		}
		want := tc.dest.Host
		if strings.HasSuffix(tc.field, ".network") {
			want = tc.dest.Network
		} else if i := strings.LastIndex(tc.field, "ports["); i >= 0 {
			j, _ := strconv.Atoi(strings.TrimSuffix(tc.field[i+len("ports["):], "]"))
			want = strconv.Itoa(int(tc.dest.Ports[j]))
		}
		if fe.Value != want {
			t.Errorf("%+v: the error names the value %q, want %q", tc.dest, fe.Value, want)
		}
	}
	p := Proxy{Hostname: "web", Port: 3128, AllowedClients: []string{"10.0.0.0/8"}, Destinations: []Destination{{Host: "a.example"}}, Policy: "Proxy {cause} %U"}
	var fe *contract.FieldError
	if _, err := Render(p); !errors.As(err, &fe) || fe.Field != "policy" {
		t.Errorf("a policy name with template marks: Render = %v, want an error naming policy", err)
	}
}

// fit splits whichever list is longer until every line fits, and loses
// no value and no port; ports split too, though today's bounds (16 ports,
// 253-byte names) never need it.
func TestFitSplitsValuesAndPorts(t *testing.T) {
	var vals, ports []string
	for i := range 40 {
		vals = append(vals, fmt.Sprintf("v%02d", i))
	}
	for i := range 300 {
		ports = append(ports, strconv.Itoa(10000+i))
	}
	covered := map[string]bool{}
	for _, l := range fit(vals, ports, func(vs, ps []string) string {
		return strings.Join(vs, ",") + ":" + strings.Join(ps, ",")
	}) {
		if len(l) > maxFilterLine {
			t.Errorf("a line of %d bytes", len(l))
		}
		vs, ps, _ := strings.Cut(l, ":")
		for _, v := range strings.Split(vs, ",") {
			for _, p := range strings.Split(ps, ",") {
				covered[v+":"+p] = true
			}
		}
	}
	if len(covered) != len(vals)*len(ports) {
		t.Errorf("%d of %d pairs covered", len(covered), len(vals)*len(ports))
	}
}
