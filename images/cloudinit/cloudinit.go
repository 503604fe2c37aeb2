// Package cloudinit renders the default proxy cloud-init for a Proxy that
// brings none of its own: a forward proxy (tinyproxy by default, squid as
// an option) on the Proxy's port, allowing only its client networks, with
// an optional upstream proxy. A user's own cloud-init never passes through
// here: the operator hands it to the provider byte for byte.
package cloudinit

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"text/template"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Server is the proxy software.
type Server string

// The servers the default cloud-init can configure. The image must hold
// the server (the debian-proxy recipe builds one with either): the
// cloud-init installs nothing, so a VM needs no package mirror to boot,
// which private clouds often cannot reach.
const (
	Tinyproxy Server = "tinyproxy"
	Squid     Server = "squid"
)

// Proxy is what the default cloud-init depends on.
type Proxy struct {
	// Hostname is the VM's hostname, a DNS-1123 label.
	Hostname string
	// Port is the proxy's TCP port.
	Port int32
	// AllowedClients are CIDRs; at least one, none a /0.
	AllowedClients []string
	// Server is the proxy software; empty means Tinyproxy.
	Server Server
	// Upstream, when set, is the host:port of a proxy to forward through
	// (a corporate egress chain).
	Upstream string
	// NoUpstream lists domains reached directly, not through Upstream.
	NoUpstream []string
	// Destinations, when any, are all the proxy lets its clients reach;
	// anything else is refused with a 403 page naming Policy. None: any
	// destination.
	Destinations []Destination
	// Policy names who refuses, on that page: the operator passes
	// "Proxy <namespace>/<name>". Letters, digits, spaces and ./_- only.
	Policy string
}

var (
	hostnameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	domainRE   = regexp.MustCompile(`^\.?[A-Za-z0-9]([-A-Za-z0-9.]{0,251}[A-Za-z0-9])?$`)
)

// Validate checks p; errors are ErrPermanent naming the field and value.
func (p Proxy) Validate() error {
	if !hostnameRE.MatchString(p.Hostname) {
		return contract.InvalidField("hostname", p.Hostname, "must be a DNS-1123 label")
	}
	if p.Port < 1 || p.Port > 65535 {
		return contract.InvalidField("port", strconv.Itoa(int(p.Port)), "must be between 1 and 65535")
	}
	if len(p.AllowedClients) == 0 {
		return contract.InvalidField("allowedClients", "", "at least one network is required; a proxy is never open to the world")
	}
	for _, c := range p.AllowedClients {
		if pfx, err := netip.ParsePrefix(c); err != nil || pfx.Bits() == 0 {
			return contract.InvalidField("allowedClients", c, "want a CIDR with a non-zero prefix, such as 10.0.0.0/8")
		}
	}
	switch p.Server {
	case "", Tinyproxy, Squid:
	default:
		return contract.InvalidField("server", string(p.Server), "one of tinyproxy, squid")
	}
	if p.Upstream != "" {
		host, port, err := net.SplitHostPort(p.Upstream)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 || !domainRE.MatchString(host) {
			return contract.InvalidField("upstream", p.Upstream, "want host:port")
		}
	}
	for _, d := range p.NoUpstream {
		if !domainRE.MatchString(d) {
			return contract.InvalidField("noUpstream", d, "want a domain such as .internal.example")
		}
	}
	if err := ValidateDestinations(p.Destinations); err != nil {
		return err
	}
	if !policyRE.MatchString(p.Policy) {
		return contract.InvalidField("policy", p.Policy, "letters, digits, spaces and ./_- only, at most 300")
	}
	return nil
}

// UpstreamHost is Upstream's host.
func (p Proxy) UpstreamHost() string {
	host, _, _ := net.SplitHostPort(p.Upstream)
	return host
}

// UpstreamPort is Upstream's port.
func (p Proxy) UpstreamPort() string {
	_, port, _ := net.SplitHostPort(p.Upstream)
	return port
}

// Render returns the default cloud-init for p.
func Render(p Proxy) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.Server == "" {
		p.Server = Tinyproxy
	}
	t := tinyproxyTmpl
	if p.Server == Squid {
		t = squidTmpl
	}
	var b bytes.Buffer
	if err := t.Execute(&b, p); err != nil {
		return nil, fmt.Errorf("cloudinit: %w", err)
	}
	return b.Bytes(), nil
}

// Both templates write the configuration before the service starts (write
// files run in cloud-init's init stage, which the image's services follow),
// so the proxy comes up configured; runcmd (the final stage, later) then
// starts the service, and restarts it only if it started before its
// configuration was written (an image that runs it earlier). Restarting
// one that runs the configuration cuts clients off: the operator serves a
// VM as soon as its proxy answers, before cloud-init has finished, and
// make e2e saw that restart refuse requests through the Service.
var tinyproxyTmpl = template.Must(template.New("tinyproxy").Funcs(funcs).Parse(`#cloud-config
hostname: {{ .Hostname }}
write_files:
  - path: /etc/tinyproxy/tinyproxy.conf
    permissions: "0644"
    content: |
      # Written by egress-proxies-operator.
      User tinyproxy
      Group tinyproxy
      Port {{ .Port }}
      Timeout 600
      MaxClients 512
      LogLevel Info
      Syslog On
      StatHost "{{ statsHost }}"
      StatFile "` + statsPath + `"
{{- range .AllowedClients }}
      Allow {{ . }}
{{- end }}
{{- if .Upstream }}
      Upstream http {{ .Upstream }}
{{- range .NoUpstream }}
      Upstream none "{{ . }}"
{{- end }}
{{- end }}
{{- if .Destinations }}
      Filter "` + tinyproxyFilterPath + `"
      FilterURLs On
      FilterType ere
      FilterDefaultDeny Yes
      ErrorFile 403 "` + tinyproxyRefusalPath + `"
  - path: ` + tinyproxyFilterPath + `
    permissions: "0644"
    content: |
{{ tinyproxyFilter .Destinations | indent }}
  - path: ` + tinyproxyRefusalPath + `
    permissions: "0644"
    content: |
{{ tinyproxyRefusal .Policy | indent }}
{{- end }}
  - path: ` + statsPath + `
    permissions: "0644"
    content: |
{{ tinyproxyStats | indent }}
  - path: ` + refusalsScriptPath + `
    permissions: "0644"
    content: |
{{ refusalsScript | indent }}
  - path: ` + refusalsUnitPath + `
    permissions: "0644"
    content: |
{{ refusalsUnit | indent }}
` + journalFile + `
runcmd:
  - [systemctl, restart, systemd-journald]
  - [systemctl, enable, --now, ` + refusalsUnitName + `]
  - [sh, -c, {{ startScript }}, start-proxy, tinyproxy, /etc/tinyproxy/tinyproxy.conf]
`))

// The squid configuration replaces Debian's whole squid.conf, whose default
// rules allow every private network.
var squidTmpl = template.Must(template.New("squid").Funcs(funcs).Parse(`#cloud-config
hostname: {{ .Hostname }}
write_files:
  - path: /etc/squid/squid.conf
    permissions: "0644"
    content: |
      # Written by egress-proxies-operator.
      http_port {{ .Port }}
{{- range .AllowedClients }}
      acl egress_clients src {{ . }}
{{- end }}
{{- if .Destinations }}
{{ squidACLs .Destinations | indent }}
{{- else }}
      http_access allow egress_clients
{{- end }}
      http_access deny all
      cache deny all
      access_log daemon:/var/log/squid/access.log squid
      coredump_dir /var/spool/squid
      # Stop quickly on restart: the default waits 30 s for open connections.
      shutdown_lifetime 1 seconds
{{- if .Upstream }}
      cache_peer {{ .UpstreamHost }} parent {{ .UpstreamPort }} 0 no-query default
{{- range .NoUpstream }}
      acl egress_direct dstdomain {{ . }}
{{- end }}
{{- if .NoUpstream }}
      always_direct allow egress_direct
{{- end }}
      never_direct allow all
{{- end }}
{{- if .Destinations }}
  - path: ` + squidRefusalPath + `
    permissions: "0644"
    content: |
{{ squidRefusal .Policy | indent }}
{{- end }}
runcmd:
  - [sh, -c, {{ startScript }}, start-proxy, squid, /etc/squid/squid.conf]
`))

// journalFile keeps the VM's journal, which holds tinyproxy's log (every
// connection with its client, every request with its URL, every refusal
// with its cause), on disk under /var/log/journal and caps it: journald
// rotates its files by itself, and log shippers read the journal natively
// (docs/egress.md, "Access log"). runcmd restarts journald to apply it.
const journalFile = `  - path: /etc/systemd/journald.conf.d/egress-proxies.conf
    permissions: "0644"
    content: |
      [Journal]
      Storage=persistent
      SystemMaxUse=256M
      MaxRetentionSec=30day`

// startScript enables the service $1 and restarts it unless it runs
// already and started after its configuration $2 was last written, in a
// later second (whole seconds: a start in the same second may have read
// the file before the write). Anything it cannot tell — a service never
// started, a systemctl or date that does not answer — restarts it.
var startScript = strings.Join([]string{
	`systemctl enable "$1"`,
	`started=$(systemctl show -p ExecMainStartTimestamp --value "$1") || started=`,
	`if systemctl -q is-active "$1" && [ -n "$started" ] && [ "$(date -d "$started" +%s)" -gt "$(stat -c %Y "$2")" ]; then exit 0; fi`,
	`exec systemctl restart "$1"`,
}, "; ")

// funcs gives the templates startScript as a YAML single-quoted scalar, on
// one line (YAML folds a line break in it into a space); the destination
// policy's files and rules; and indent, which makes lines the content of
// a write_files block scalar.
var funcs = template.FuncMap{
	"startScript": func() string {
		return "'" + strings.ReplaceAll(startScript, "'", "''") + "'"
	},
	"statsHost":        func() string { return StatsHost },
	"tinyproxyStats":   func() string { return tinyproxyStats },
	"refusalsScript":   func() string { return refusalsScript },
	"refusalsUnit":     func() string { return refusalsUnitFile },
	"tinyproxyFilter":  tinyproxyFilter,
	"squidACLs":        squidACLs,
	"tinyproxyRefusal": refusalPage(tinyproxyRefusal),
	"squidRefusal":     refusalPage(squidRefusal),
	"indent": func(text string) string {
		lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		for i, l := range lines {
			lines[i] = "      " + l
		}
		return strings.Join(lines, "\n")
	},
}
