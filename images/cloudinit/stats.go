package cloudinit

import (
	"bufio"
	"bytes"
	_ "embed" // the refusals counter's script
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
	statsHeader = "egress-proxies-stats v2"
)

// tinyproxyStats is the page's template; tinyproxy fills each {name}
// (stats.c: opens, reqs, badconns, deniedconns, refusedconns). The last
// two lines are the refusals counter's, which rewrites them.
const tinyproxyStats = statsHeader + `
open {opens}
connections {reqs}
bad {badconns}
denied {deniedconns}
refused {refusedconns}
client-refusals 0
destination-refusals 0
`

// The refusals counter: tinyproxy counts both kinds of refusal in one
// counter but logs each with its own message, so a small service on the
// VM reads tinyproxy's messages of this boot from the journal and keeps
// the count of each kind in the page's template (refusals.py). It runs
// Python, which the image has for cloud-init: about 10 MB of memory and no
// CPU while nothing is refused. Reading the whole boot's messages, its
// counts only grow while the VM runs, whatever restarts.
const (
	refusalsScriptPath = "/usr/local/lib/egress-proxies/refusals.py"
	refusalsUnitName   = "egress-proxies-refusals.service"
	refusalsUnitPath   = "/etc/systemd/system/" + refusalsUnitName
)

//go:embed refusals.py
var refusalsScript string

// refusalsUnitFile runs the counter as root (it reads the journal and
// replaces a file in /etc/tinyproxy) with nothing else to write and no
// network, and again a second after it ends (journalctl ends when journald
// restarts). It runs at idle CPU and I/O priority: the VM may already serve
// clients when cloud-init starts it, and reading the boot's journal must
// not take the CPU from tinyproxy on a small or emulated VM. systemd reads
// a unit file it has not loaded when it is first named, so starting it
// needs no daemon-reload.
const refusalsUnitFile = `[Unit]
Description=Counts tinyproxy's refusals by reason for its statistics page
After=systemd-journald.service

[Service]
ExecStart=/bin/sh -c 'journalctl --boot --follow --lines=all --output=cat --unit=tinyproxy.service | exec python3 ` + refusalsScriptPath + ` ` + statsPath + `'
Restart=always
RestartSec=1
Nice=19
CPUSchedulingPolicy=idle
IOSchedulingClass=idle
NoNewPrivileges=yes
PrivateNetwork=yes
ProtectSystem=strict
ReadWritePaths=/etc/tinyproxy
ProtectHome=yes

[Install]
WantedBy=multi-user.target
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
	// ClientRefusals and DestinationRefusals are the refusals of each
	// kind since the VM booted, as the refusals counter read them from
	// tinyproxy's log: a client outside the allowed networks, a
	// destination outside the policy.
	ClientRefusals, DestinationRefusals uint64
}

// ParseStats reads the statistics page's body; ok is false when the body
// is not the page (another server answered, or the page was cut short).
func ParseStats(body []byte) (s Stats, ok bool) {
	fields := map[string]*uint64{"open": &s.Open, "connections": &s.Connections, "bad": &s.Bad, "denied": &s.Denied, "refused": &s.Refused,
		"client-refusals": &s.ClientRefusals, "destination-refusals": &s.DestinationRefusals}
	want := len(fields)
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
	return s, seen == want
}
