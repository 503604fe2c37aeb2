package nocloud

import (
	"fmt"
	"net"
	"net/netip"

	"go.yaml.in/yaml/v3"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// NetworkConfig renders a static network as cloud-init's network config
// version 2 (docs.cloud-init.io, "Networking config Version 2"): one
// ethernet, matched by its MAC address and named "eth0", with the address,
// the gateway and the resolvers. Matching by MAC (with set-name) is what
// every cloud-init renderer supports (netplan, networkd, ENI, sysconfig);
// a name glob is netplan's alone. The same document is the network key of
// the VMware datasource's metadata.
//
// The default route is gateway4, not a route to 0.0.0.0/0, although
// netplan calls gateway4 deprecated: cloud-init turns gateway4 into the
// subnet's gateway (cloudinit/net/network_state.py, _v2_to_v1_ipcfg),
// which every renderer writes as the interface's own (ENI's "gateway"
// line, which ifupdown applies with ip route), while it renders a v2
// route for ENI as "post-up route add default gw ... || true"
// (cloudinit/net/eni.py, _render_route): net-tools' route, which a
// minimal Debian 12 guest does not have, so the guest booted with no
// default route (seen on the debian-proxy image; providers/libvirt
// TestStaticAddressLifecycle).
func NetworkConfig(n contract.StaticNetwork, mac string) ([]byte, error) {
	if err := n.Validate(); err != nil {
		return nil, err
	}
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return nil, contract.InvalidField("mac", mac, "must be an Ethernet MAC address such as 52:54:00:12:34:56")
	}
	type nameservers struct {
		Addresses []string `yaml:"addresses"`
	}
	type ethernet struct {
		Match       map[string]string `yaml:"match"`
		SetName     string            `yaml:"set-name"`
		DHCP4       bool              `yaml:"dhcp4"`
		DHCP6       bool              `yaml:"dhcp6"`
		Addresses   []string          `yaml:"addresses"`
		Gateway4    string            `yaml:"gateway4"`
		Nameservers *nameservers      `yaml:"nameservers,omitempty"`
	}
	eth := ethernet{
		Match:     map[string]string{"macaddress": hw.String()},
		SetName:   "eth0",
		Addresses: []string{n.Address.String()},
		Gateway4:  n.Gateway.String(),
	}
	if len(n.DNS) > 0 {
		eth.Nameservers = &nameservers{Addresses: addrStrings(n.DNS)}
	}
	out, err := yaml.Marshal(map[string]any{"version": 2, "ethernets": map[string]ethernet{"eth0": eth}})
	if err != nil {
		return nil, fmt.Errorf("rendering network-config: %w", err)
	}
	return out, nil
}

func addrStrings(as []netip.Addr) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}
