package libvirt

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"libvirt.org/go/libvirt"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// The harness's NetworkReader on both controls: the static network read
// back as the guest reads it, from the network-config file of the seed
// volume the domain boots with, and applied to the NIC it matches. A
// network-config that matches no NIC of the domain delivers nothing (the
// guest renders it for no interface), so that is an error here, not a
// network.

// DeliveredNetwork reads the network-config of the seed uploaded to the
// test driver's pool.
func (c control) DeliveredNetwork(_ context.Context, providerID string) (contract.StaticNetwork, error) {
	iso, err := c.b.seed(providerID)
	if err != nil {
		return contract.StaticNetwork{}, err
	}
	return c.b.delivered(providerID, iso)
}

// DeliveredNetwork downloads the seed from the private daemon and reads
// its network-config.
func (r *realControl) DeliveredNetwork(_ context.Context, providerID string) (contract.StaticNetwork, error) {
	region, name, err := ids.Parse(providerID)
	if err != nil {
		return contract.StaticNetwork{}, err
	}
	if region != "lab" {
		return contract.StaticNetwork{}, fmt.Errorf("control: no region %q", region)
	}
	return r.b.delivered(providerID, download(r.t, r.lab.uri, r.lab.pool, seedName(name)))
}

// delivered parses the seed's network-config for the MAC of the domain's
// one NIC, read from its persistent definition.
func (b *testBackend) delivered(providerID string, iso []byte) (contract.StaticNetwork, error) {
	doc, err := readISOFile(iso, "network-config")
	if err != nil {
		return contract.StaticNetwork{}, err
	}
	var mac string
	err = b.withDomain(providerID, func(dom *libvirt.Domain) error {
		def, err := persistentDefinition(dom)
		if err != nil {
			return err
		}
		if def.Devices == nil || len(def.Devices.Interfaces) != 1 || def.Devices.Interfaces[0].MAC == nil {
			return fmt.Errorf("domain %s: want exactly one NIC with a MAC address", providerID)
		}
		mac = def.Devices.Interfaces[0].MAC.Address
		return nil
	})
	if err != nil {
		return contract.StaticNetwork{}, err
	}
	return parseNetworkConfig(doc, mac)
}

// networkConfigV2 is the part of cloud-init's network config version 2
// (https://docs.cloud-init.io/en/latest/reference/network-config-format-v2.html)
// that configures an ethernet's IPv4 statically: match by macaddress,
// set-name, dhcp4, addresses, the default route (gateway4, or a route to
// 0.0.0.0/0 or "default") and nameservers.
type networkConfigV2 struct {
	Version   int `yaml:"version"`
	Ethernets map[string]struct {
		Match struct {
			MACAddress string `yaml:"macaddress"`
		} `yaml:"match"`
		DHCP4     bool     `yaml:"dhcp4"`
		Addresses []string `yaml:"addresses"`
		Gateway4  string   `yaml:"gateway4"`
		Routes    []struct {
			To  string `yaml:"to"`
			Via string `yaml:"via"`
		} `yaml:"routes"`
		Nameservers struct {
			Addresses []string `yaml:"addresses"`
		} `yaml:"nameservers"`
	} `yaml:"ethernets"`
}

// parseNetworkConfig reads the static IPv4 network a version 2
// network-config gives the NIC with the MAC address mac. cloud-init
// lowercases a match's macaddress before comparing it
// (cloudinit/net/network_state.py, handle_ethernets), so the comparison
// ignores case.
func parseNetworkConfig(doc []byte, mac string) (contract.StaticNetwork, error) {
	var cfg networkConfigV2
	if err := yaml.Unmarshal(doc, &cfg); err != nil {
		return contract.StaticNetwork{}, fmt.Errorf("network-config: %w\n%s", err, doc)
	}
	if cfg.Version != 2 {
		return contract.StaticNetwork{}, fmt.Errorf("network-config version %d, want 2:\n%s", cfg.Version, doc)
	}
	want, err := net.ParseMAC(mac)
	if err != nil {
		return contract.StaticNetwork{}, fmt.Errorf("the domain's MAC %q: %w", mac, err)
	}
	for name, eth := range cfg.Ethernets {
		if got, err := net.ParseMAC(eth.Match.MACAddress); err != nil || got.String() != want.String() {
			continue
		}
		if eth.DHCP4 {
			return contract.StaticNetwork{}, fmt.Errorf("network-config: %s also asks for DHCP:\n%s", name, doc)
		}
		if len(eth.Addresses) != 1 {
			return contract.StaticNetwork{}, fmt.Errorf("network-config: %s has addresses %v, want one:\n%s", name, eth.Addresses, doc)
		}
		var n contract.StaticNetwork
		if n.Address, err = netip.ParsePrefix(eth.Addresses[0]); err != nil {
			return contract.StaticNetwork{}, fmt.Errorf("network-config: %s address: %w", name, err)
		}
		gateways := []string{}
		if eth.Gateway4 != "" {
			gateways = append(gateways, eth.Gateway4)
		}
		for _, r := range eth.Routes {
			if r.To == "0.0.0.0/0" || r.To == "default" {
				gateways = append(gateways, r.Via)
			}
		}
		if len(gateways) != 1 {
			return contract.StaticNetwork{}, fmt.Errorf("network-config: %s has default routes via %v, want one:\n%s", name, gateways, doc)
		}
		if n.Gateway, err = netip.ParseAddr(gateways[0]); err != nil {
			return contract.StaticNetwork{}, fmt.Errorf("network-config: %s gateway: %w", name, err)
		}
		for _, s := range eth.Nameservers.Addresses {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return contract.StaticNetwork{}, fmt.Errorf("network-config: %s nameserver: %w", name, err)
			}
			n.DNS = append(n.DNS, a)
		}
		if len(cfg.Ethernets) != 1 {
			return contract.StaticNetwork{}, fmt.Errorf("network-config configures %d ethernets, want the NIC's alone:\n%s", len(cfg.Ethernets), doc)
		}
		return n, nil
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for name, eth := range cfg.Ethernets {
			if !yield(name + " (" + eth.Match.MACAddress + ")") {
				return
			}
		}
	})
	return contract.StaticNetwork{}, fmt.Errorf("network-config matches no NIC of the domain (its MAC is %s; it configures %s)", mac, strings.Join(names, ", "))
}
