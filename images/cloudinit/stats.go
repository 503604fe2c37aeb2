package cloudinit

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// The default tinyproxy serves its counters on a statistics page: a
// request whose Host is StatsHost, from an allowed client, is answered by
// tinyproxy itself (reqs.c process_request, before its filter) with the
// page StatFile names, its {variables} filled in (stats.c showstats). The
// page written here is plain text the operator's probe parses
// (ParseStats), so one probe both checks the proxy and reads its traffic
// (docs/egress.md, "Traffic").
const (
	// StatsHost is the name the statistics page answers to. A name under
	// .invalid (RFC 6761) that no resolver may look up: a server that is
	// not this tinyproxy refuses the request at once.
	StatsHost = "stats.egress-proxies.invalid"
	// statsPath is the page's template on the VM.
	statsPath = "/etc/tinyproxy/egress-stats.txt"
	// statsHeader is the page's first line: what the probe checks before it
	// trusts a number.
	statsHeader = "egress-proxies-stats v1"
)

// tinyproxyStats is the page's template; tinyproxy fills each {name}
// (stats.c: opens, reqs, badconns, deniedconns, refusedconns).
const tinyproxyStats = statsHeader + `
open {opens}
connections {reqs}
bad {badconns}
denied {deniedconns}
refused {refusedconns}
`

// Stats are a tinyproxy's counters since it started, as its statistics
// page gives them. The request for the page is one of them: it is an
// open connection while it is answered, and a connection counted.
type Stats struct {
	// Open is the connections open now.
	Open uint64
	// Connections is every client connection the server accepted: one
	// request, or several on a keep-alive connection, or a CONNECT tunnel.
	Connections uint64
	// Bad is the connections that sent no request the server could read.
	Bad uint64
	// Denied is the requests refused with a 403: a client outside the
	// allowed networks, or a destination outside the policy (tinyproxy
	// counts both in one counter).
	Denied uint64
	// Refused is the connections refused for load (MaxClients).
	Refused uint64
}

// ParseStats reads the statistics page's body; ok is false when the body
// is not the page (another server answered, or the page was cut short).
func ParseStats(body []byte) (s Stats, ok bool) {
	fields := map[string]*uint64{"open": &s.Open, "connections": &s.Connections, "bad": &s.Bad, "denied": &s.Denied, "refused": &s.Refused}
	sc := bufio.NewScanner(bytes.NewReader(body))
	if !sc.Scan() || strings.TrimSpace(sc.Text()) != statsHeader {
		return Stats{}, false
	}
	seen := 0
	for sc.Scan() {
		name, value, found := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		field, known := fields[name]
		if !found || !known {
			continue
		}
		n, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			return Stats{}, false
		}
		*field = n
		seen++
		delete(fields, name)
	}
	return s, seen == 5
}
