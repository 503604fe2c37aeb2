package cloudinit

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Destination is a host or an IPv4 network the proxy lets its clients
// reach, and on which ports.
type Destination struct {
	// Host is a DNS name (api.partner.example), or "*." and a name for
	// every name below it (*.partner.example: api.partner.example and
	// a.b.partner.example, not partner.example). Lower case.
	Host string
	// Network is an IPv4 network in CIDR notation, its first address
	// (203.0.113.0/24; an address is a /32). tinyproxy matches it against
	// an address written in the request only; squid also against the
	// addresses a requested name resolves to (its dst ACL).
	Network string
	// Ports are the ports plain HTTP and CONNECT may reach. Empty: port 80
	// for plain HTTP and 443 for CONNECT, as Squid's default Safe_ports
	// and SSL_ports narrowed to the web's two.
	Ports []int32
}

// The ports a destination without ports may be reached on.
const (
	defaultHTTPPort    = 80
	defaultConnectPort = 443
)

var (
	// hostRE is a DNS-1123 subdomain, with an optional leading "*.".
	hostRE   = regexp.MustCompile(`^(\*\.)?[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$`)
	policyRE = regexp.MustCompile(`^[A-Za-z0-9 ./_-]{0,300}$`)
)

// ValidateDestinations checks each destination; an error is ErrPermanent
// naming the field (egress.destinations[i].host, .network, .ports[j]) and
// the value.
func ValidateDestinations(dests []Destination) error {
	for i, d := range dests {
		if err := d.validate(i); err != nil {
			return err
		}
	}
	return nil
}

// validate checks d, the destination at index i of the Proxy's list;
// errors name the field as the Proxy's spec does.
func (d Destination) validate(i int) error {
	field := func(name string) string { return fmt.Sprintf("egress.destinations[%d].%s", i, name) }
	switch {
	case d.Host == "" && d.Network == "":
		return contract.InvalidField(field("host"), "", "set one of host and network")
	case d.Host != "" && d.Network != "":
		return contract.InvalidField(field("network"), d.Network, "set one of host and network, not both")
	case d.Host != "":
		if len(d.Host) > 253 || !hostRE.MatchString(d.Host) {
			return contract.InvalidField(field("host"), d.Host, "want a lower-case DNS name such as api.partner.example, or *.partner.example for every name below partner.example")
		}
		if _, err := netip.ParseAddr(d.Host); err == nil {
			return contract.InvalidField(field("host"), d.Host, "an address: list it as network "+d.Host+"/32")
		}
	default:
		p, err := netip.ParsePrefix(d.Network)
		if err != nil || !p.Addr().Is4() || p.Bits() == 0 || p.Masked() != p {
			return contract.InvalidField(field("network"), d.Network, "want an IPv4 network by its first address, /1 to /32, such as 203.0.113.0/24; to let out any destination leave egress unset")
		}
	}
	seen := map[int32]bool{}
	for j, port := range d.Ports {
		if port < 1 || port > 65535 || seen[port] {
			return contract.InvalidField(fmt.Sprintf("%s[%d]", field("ports"), j), strconv.Itoa(int(port)), "want distinct ports between 1 and 65535")
		}
		seen[port] = true
	}
	return nil
}

// ports returns the ports plain HTTP and CONNECT may reach d on.
func (d Destination) ports() (http, connect []int32) {
	if len(d.Ports) == 0 {
		return []int32{defaultHTTPPort}, []int32{defaultConnectPort}
	}
	return d.Ports, d.Ports
}

// The refusal pages say who refused and why. tinyproxy fills {cause},
// {detail} and {url} (its html-error.c); squid fills %U (errorpage.cc).
// The same tinyproxy page serves a client it does not allow (cause
// "Access denied") and a destination its filter refuses ("Filtered").
const (
	tinyproxyRefusal = `<html><head><title>{errno} {cause}</title></head><body>
<h1>{cause}</h1><p>{detail}: {url}</p>
<p>Refused by the egress policy of %s: it lets out only the destinations of its spec.egress, to the clients of its spec.allowedClients.</p>
</body></html>
`
	squidRefusal = `<html><head><title>403 Forbidden</title></head><body>
<h1>Destination not allowed</h1><p>%%U</p>
<p>Refused by the egress policy of %s: it lets out only the destinations of its spec.egress.</p>
</body></html>
`
)

// The files the default cloud-init writes for a destination policy.
const (
	tinyproxyFilterPath  = "/etc/tinyproxy/egress-filter"
	tinyproxyRefusalPath = "/etc/tinyproxy/egress-refused.html"
	// squid finds a deny_info page by name only, in its error directory
	// (an absolute path is answered "Missing Template"): Debian's
	// templates directory, the fallback of every language.
	squidRefusalPage = "ERR_EGRESS_POLICY"
	squidRefusalPath = "/usr/share/squid/errors/templates/" + squidRefusalPage
)

// refusalPage fills a refusal page with the policy's name.
func refusalPage(page string) func(policy string) string {
	return func(policy string) string {
		if policy == "" {
			policy = "this proxy"
		}
		return fmt.Sprintf(page, policy)
	}
}

// maxFilterLine is the longest filter line tinyproxy reads whole: it reads
// the file with fgets into 512 bytes (filter.c FILTER_BUFFER_LEN), so a
// longer line would be cut into two patterns.
const maxFilterLine = 510

// tinyproxyFilter returns tinyproxy's filter file for the destinations:
// extended regular expressions (FilterType ere), matched case-insensitively
// against the request's URL as the client sent it (FilterURLs On) — for
// plain HTTP "http://host[:port]/path", for CONNECT "host:port" (reqs.c
// process_request) — and only a match is let through (FilterDefaultDeny).
// Each pattern is anchored at both ends of the authority, so a longer
// name, a user part or another port never matches.
//
// The first line lets the operator's probe read the statistics page
// (StatsHost): tinyproxy before 1.11.2 runs the filter before it checks
// for that page (reqs.c process_request), and a request the filter lets
// through to that name is answered by tinyproxy itself, never forwarded.
func tinyproxyFilter(dests []Destination) string {
	var b strings.Builder
	b.WriteString("^http://" + regexp.QuoteMeta(StatsHost) + "/$\n")
	for _, d := range dests {
		httpPorts, connectPorts := d.ports()
		prefix, values, suffix := hostPattern(d)
		for _, line := range fit(values, portStrings(httpPorts), func(vals, ports []string) string {
			port := ":" + alternation(ports)
			if slices.Contains(ports, strconv.Itoa(defaultHTTPPort)) {
				// With 80 among them, the port may also go unwritten.
				port = "(" + port + ")?"
			}
			return "^http://" + prefix + alternation(vals) + suffix + port + "(/|$)"
		}) {
			b.WriteString(line + "\n")
		}
		for _, line := range fit(values, portStrings(connectPorts), func(vals, ports []string) string {
			return "^" + prefix + alternation(vals) + suffix + ":" + alternation(ports) + "$"
		}) {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// hostPattern returns d's host as a regular expression: a fixed prefix,
// the alternatives of its one varying part (none for a name) and a fixed
// suffix.
func hostPattern(d Destination) (prefix string, values []string, suffix string) {
	if d.Host != "" {
		if name, ok := strings.CutPrefix(d.Host, "*."); ok {
			// One or more labels below name: no "/", ":" or "@" before it.
			return `[^/:@]+\.` + regexp.QuoteMeta(name), nil, ""
		}
		return regexp.QuoteMeta(d.Host), nil, ""
	}
	p := netip.MustParsePrefix(d.Network)
	octets := p.Addr().As4()
	whole, part := p.Bits()/8, p.Bits()%8
	var fixed []string
	for _, o := range octets[:whole] {
		fixed = append(fixed, strconv.Itoa(int(o)))
	}
	if whole == 4 {
		return strings.Join(fixed, `\.`), nil, ""
	}
	prefix = strings.Join(append(fixed, ""), `\.`)
	rest := 3 - whole // the octets after the varying one, any value
	suffix = strings.Repeat(`\.`+anyOctet, rest)
	if part == 0 {
		return prefix, []string{anyOctet}, suffix
	}
	first := int(octets[whole])
	for v := first; v < first+1<<(8-part); v++ {
		values = append(values, strconv.Itoa(v))
	}
	return prefix, values, suffix
}

// anyOctet matches a decimal octet, 0 to 255, without leading zeros: the
// only form a dotted address is written in that the filter lets through.
const anyOctet = `(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])`

// fit returns line(vals, ports) split into as few lines as fit tinyproxy's
// line length, together matching every value with every port.
func fit(vals, ports []string, line func(vals, ports []string) string) []string {
	if l := line(vals, ports); len(l) <= maxFilterLine || (len(vals) <= 1 && len(ports) <= 1) {
		return []string{l}
	}
	if len(vals) >= len(ports) {
		h := len(vals) / 2
		return append(fit(vals[:h], ports, line), fit(vals[h:], ports, line)...)
	}
	h := len(ports) / 2
	return append(fit(vals, ports[:h], line), fit(vals, ports[h:], line)...)
}

// alternation is a group matching one of alts; none is the empty string.
func alternation(alts []string) string {
	switch len(alts) {
	case 0:
		return ""
	case 1:
		return alts[0]
	}
	return "(" + strings.Join(alts, "|") + ")"
}

func portStrings(ports []int32) []string {
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = strconv.Itoa(int(p))
	}
	return out
}

// squidACLs returns squid's rules for the destinations, to follow the ACL
// of the allowed clients (egress_clients): a client not allowed is denied
// first (squid's own ERR_ACCESS_DENIED page), then each destination is
// allowed on its ports, and anything else is denied with the policy's
// page (deny_info names the last ACL of the denying line). Names are
// matched without DNS lookups (-n): a reverse lookup of an address would
// ask the cloud's resolver about every refused request.
func squidACLs(dests []Destination) string {
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	line("acl egress_connect method CONNECT")
	line("acl egress_http_default port %d", defaultHTTPPort)
	line("acl egress_connect_default port %d", defaultConnectPort)
	line("http_access deny !egress_clients")
	for i, d := range dests {
		dst := fmt.Sprintf("egress_dst_%d", i)
		switch {
		case d.Network != "":
			line("acl %s dst %s", dst, d.Network)
		case strings.HasPrefix(d.Host, "*."):
			line(`acl %s dstdom_regex -n -i %s$`, dst, `\.`+regexp.QuoteMeta(strings.TrimPrefix(d.Host, "*.")))
		default:
			line("acl %s dstdomain -n %s", dst, d.Host)
		}
		if len(d.Ports) == 0 {
			line("http_access allow %s !egress_connect egress_http_default", dst)
			line("http_access allow %s egress_connect egress_connect_default", dst)
			continue
		}
		ports := fmt.Sprintf("egress_ports_%d", i)
		line("acl %s port %s", ports, strings.Join(portStrings(d.Ports), " "))
		line("http_access allow %s %s", dst, ports)
	}
	line("acl egress_refused src all")
	line("deny_info %s egress_refused", squidRefusalPage)
	line("http_access deny egress_refused")
	return b.String()
}
