// Package cloudinit renders the default proxy cloud-init for a Proxy that
// brings none of its own: tinyproxy on the Proxy's port, allowing only its
// client networks.
package cloudinit

import (
	"bytes"
	"fmt"
	"net/netip"
	"text/template"
)

// Proxy is what the default cloud-init depends on.
type Proxy struct {
	// Hostname is the VM's hostname.
	Hostname string
	// Port is the proxy's TCP port.
	Port int32
	// AllowedClients are CIDRs; at least one, none a /0.
	AllowedClients []string
}

var tmpl = template.Must(template.New("cloud-config").Parse(`#cloud-config
hostname: {{ .Hostname }}
package_update: false
packages:
  - tinyproxy
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
      DisableViaHeader Yes
{{- range .AllowedClients }}
      Allow {{ . }}
{{- end }}
runcmd:
  - [systemctl, enable, tinyproxy]
  - [systemctl, restart, tinyproxy]
`))

// Render returns the default cloud-init for p.
func Render(p Proxy) ([]byte, error) {
	if len(p.AllowedClients) == 0 {
		return nil, fmt.Errorf("allowedClients: at least one network is required; a proxy is never open to the world")
	}
	for _, c := range p.AllowedClients {
		pfx, err := netip.ParsePrefix(c)
		if err != nil || pfx.Bits() == 0 {
			return nil, fmt.Errorf("allowedClients %q: want a CIDR with a non-zero prefix", c)
		}
	}
	if p.Port < 1 || p.Port > 65535 {
		return nil, fmt.Errorf("port %d: must be between 1 and 65535", p.Port)
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, p); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
