package proxmox

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

var _ contracttest.NetworkReader = control{}

// DeliveredNetwork reads the static network the guest is given, as it
// reads it: cloud-init's NoCloud datasource takes network-config from the
// seed on the VM's cdrom (PVE renders ipconfig0 for no drive but a
// vm-<vmid>-cloudinit one: qemu-server Cloudinit.pm
// generate_cloudinit_config), and applies it to the NIC whose MAC it
// matches, so that MAC must be net0's. The VM's ipconfig0 and nameserver,
// which Get reads, must say the same: a record that disagrees with what
// the guest reads is an error.
func (c control) DeliveredNetwork(_ context.Context, providerID string) (contract.StaticNetwork, error) {
	vmid, err := vmidOf(providerID)
	if err != nil {
		return contract.StaticNetwork{}, err
	}
	n, mac, err := seedNetwork(c.f, vmid)
	if err != nil {
		return contract.StaticNetwork{}, err
	}
	conf, _ := c.f.s.Config(vmid)
	model, _, _ := strings.Cut(conf["net0"], ",")
	if _, nicMAC, _ := strings.Cut(model, "="); !strings.EqualFold(mac, nicMAC) {
		return contract.StaticNetwork{}, fmt.Errorf("VM %d: network-config matches MAC %q, net0 is %q: the guest applies it to no NIC", vmid, mac, conf["net0"])
	}
	wantIPConfig := fmt.Sprintf("ip=%s,gw=%s", n.Address, n.Gateway)
	wantDNS := strings.Join(addrStrings(n.DNS), " ")
	if conf["ipconfig0"] != wantIPConfig || conf["nameserver"] != wantDNS {
		return contract.StaticNetwork{}, fmt.Errorf("VM %d: ipconfig0 %q, nameserver %q disagree with the seed's network-config (%s, DNS %q)",
			vmid, conf["ipconfig0"], conf["nameserver"], wantIPConfig, wantDNS)
	}
	return n, nil
}

// seedNetwork parses the network-config (version 2) of the seed on the
// VM's cdrom as cloud-init reads it: the ethernet's address, its default
// route (routes to 0.0.0.0/0 or "default", or gateway4), its resolvers,
// and the MAC it matches.
func seedNetwork(f *fake, vmid int) (contract.StaticNetwork, string, error) {
	conf, ok := f.s.Config(vmid)
	if !ok {
		return contract.StaticNetwork{}, "", fmt.Errorf("no VM %d", vmid)
	}
	volid, _, _ := strings.Cut(conf["ide2"], ",")
	iso, ok := f.s.Volume(f.s.Node(vmid), volid)
	if !ok {
		return contract.StaticNetwork{}, "", fmt.Errorf("VM %d's cdrom %q is not on the storage", vmid, conf["ide2"])
	}
	raw, err := readISOFile(iso, "network-config")
	if err != nil {
		return contract.StaticNetwork{}, "", err
	}
	var doc struct {
		Version   int `yaml:"version"`
		Ethernets map[string]struct {
			Match struct {
				MACAddress string `yaml:"macaddress"`
			} `yaml:"match"`
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
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return contract.StaticNetwork{}, "", fmt.Errorf("network-config: %w", err)
	}
	if doc.Version != 2 || len(doc.Ethernets) != 1 {
		return contract.StaticNetwork{}, "", fmt.Errorf("network-config: version %d with %d ethernets, want version 2 with one:\n%s", doc.Version, len(doc.Ethernets), raw)
	}
	var n contract.StaticNetwork
	for _, eth := range doc.Ethernets {
		if len(eth.Addresses) != 1 {
			return n, "", fmt.Errorf("network-config: addresses %q, want one", eth.Addresses)
		}
		if n.Address, err = netip.ParsePrefix(eth.Addresses[0]); err != nil {
			return n, "", fmt.Errorf("network-config: %w", err)
		}
		gw := eth.Gateway4
		for _, r := range eth.Routes {
			if r.To == "0.0.0.0/0" || r.To == "default" {
				gw = r.Via
			}
		}
		if n.Gateway, err = netip.ParseAddr(gw); err != nil {
			return n, "", fmt.Errorf("network-config: no default route: %w", err)
		}
		for _, d := range eth.Nameservers.Addresses {
			a, err := netip.ParseAddr(d)
			if err != nil {
				return n, "", fmt.Errorf("network-config: nameserver: %w", err)
			}
			n.DNS = append(n.DNS, a)
		}
		return n, eth.Match.MACAddress, nil
	}
	return n, "", nil
}

// sameNetwork compares two networks field by field, resolvers in order.
func sameNetwork(a, b contract.StaticNetwork) bool {
	return a.Address == b.Address && a.Gateway == b.Gateway && slices.Equal(a.DNS, b.DNS)
}

func addrStrings(as []netip.Addr) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}
