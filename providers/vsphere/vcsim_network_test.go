package vsphere

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	"go.yaml.in/yaml/v3"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

// The control reads the static network back the way the guest does:
// cloud-init's VMware datasource, cloudinit/sources/DataSourceVMware.py
// (canonical/cloud-init, added by 8b4a9bc7b "Datasource for VMware (#953)",
// first released in 21.3; decode, load_json_or_yaml and process_metadata
// as there and unchanged at 04eacd06e), reads guestinfo.metadata through VMware Tools,
// decodes it by guestinfo.metadata.encoding (decode: "gzip+base64" or
// "gz+b64" is base64 then gunzip, "base64" or "b64" is base64, anything
// else is plain text; a value that is empty or "---" once right-stripped is
// none: get_none_if_empty_val), loads it as JSON or else YAML
// (load_json_or_yaml), and takes its "network" key as the network config
// (process_metadata: a mapping as it is; a string decoded by the
// metadata's "network.encoding" and loaded again). The config is then
// cloud-init's network config version 2 (docs.cloud-init.io, "Networking
// config Version 2"): an ethernet applies to the NIC its match names.

var _ contracttest.NetworkReader = control{}

// DeliveredNetwork reads the VM's guestinfo.metadata from its extraConfig
// and parses its network back into a StaticNetwork, as the guest would
// apply it to the VM's first network card: the one ethernet must match
// that card's MAC, or the guest would configure nothing with it.
func (c control) DeliveredNetwork(ctx context.Context, providerID string) (contract.StaticNetwork, error) {
	vm, err := c.vm(ctx, providerID)
	if err != nil {
		return contract.StaticNetwork{}, err
	}
	return c.networkOf(ctx, vm)
}

// networkOf is DeliveredNetwork of the VM vm.
func (c control) networkOf(ctx context.Context, vm *object.VirtualMachine) (contract.StaticNetwork, error) {
	var props mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"config.extraConfig", "config.hardware.device"}, &props); err != nil {
		return contract.StaticNetwork{}, err
	}
	e := extra(props)
	md, err := guestinfoDecode(e["guestinfo.metadata"], e["guestinfo.metadata.encoding"])
	if err != nil {
		return contract.StaticNetwork{}, fmt.Errorf("guestinfo.metadata: %w", err)
	}
	meta, err := jsonOrYAML(md)
	if err != nil {
		return contract.StaticNetwork{}, fmt.Errorf("guestinfo.metadata: %w", err)
	}
	config, err := metadataNetwork(meta)
	if err != nil {
		return contract.StaticNetwork{}, err
	}
	return parseNetworkV2(config, cardMAC(props))
}

// guestinfoDecode is the datasource's decode of a guestinfo value by its
// encoding key's value.
func guestinfoDecode(val, enc string) ([]byte, error) {
	if v := strings.TrimRight(val, " \t\r\n"); v == "" || v == "---" {
		return nil, fmt.Errorf("no value")
	}
	switch enc {
	case "gzip+base64", "gz+b64":
		raw, err := base64.StdEncoding.DecodeString(val)
		if err != nil {
			return nil, err
		}
		r, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(r)
	case "base64", "b64":
		return base64.StdEncoding.DecodeString(val)
	}
	return []byte(val), nil
}

// jsonOrYAML is the datasource's load_json_or_yaml, for a mapping.
func jsonOrYAML(data []byte) (map[string]any, error) {
	var out map[string]any
	if json.Unmarshal(data, &out) == nil {
		return out, nil
	}
	if err := yaml.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// metadataNetwork is the datasource's process_metadata for the network key.
func metadataNetwork(meta map[string]any) (map[string]any, error) {
	switch n := meta["network"].(type) {
	case map[string]any:
		return n, nil
	case string:
		enc, _ := meta["network.encoding"].(string)
		dec, err := guestinfoDecode(n, enc)
		if err != nil {
			return nil, fmt.Errorf("metadata network: %w", err)
		}
		return jsonOrYAML(dec)
	case nil:
		return nil, fmt.Errorf("the metadata has no network key: the guest keeps its fallback network (DHCP)")
	default:
		return nil, fmt.Errorf("the metadata's network key is a %T", n)
	}
}

// parseNetworkV2 reads one static ethernet of a version 2 network config,
// matched by mac.
func parseNetworkV2(config map[string]any, mac string) (contract.StaticNetwork, error) {
	var doc struct {
		Version   int
		Ethernets map[string]struct {
			Match       map[string]string
			DHCP4       bool
			Addresses   []string
			Gateway4    string
			Routes      []struct{ To, Via string }
			Nameservers struct{ Addresses []string }
		}
	}
	raw, err := yaml.Marshal(config)
	if err != nil {
		return contract.StaticNetwork{}, err
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return contract.StaticNetwork{}, fmt.Errorf("network config: %w", err)
	}
	if doc.Version != 2 || len(doc.Ethernets) != 1 {
		return contract.StaticNetwork{}, fmt.Errorf("network config: version %d with %d ethernets, want version 2 with one:\n%s", doc.Version, len(doc.Ethernets), raw)
	}
	var n contract.StaticNetwork
	for id, eth := range doc.Ethernets {
		if got := eth.Match["macaddress"]; mac == "" || !strings.EqualFold(got, mac) {
			return n, fmt.Errorf("ethernet %s matches MAC %q, but the VM's network card has %q: the guest would not apply it", id, got, mac)
		}
		if eth.DHCP4 || len(eth.Addresses) != 1 {
			return n, fmt.Errorf("ethernet %s: dhcp4 %v with addresses %v, want one static address", id, eth.DHCP4, eth.Addresses)
		}
		if n.Address, err = netip.ParsePrefix(eth.Addresses[0]); err != nil {
			return n, fmt.Errorf("ethernet %s: %w", id, err)
		}
		gw := eth.Gateway4
		for _, r := range eth.Routes {
			if r.To == "0.0.0.0/0" || r.To == "default" {
				gw = r.Via
			}
		}
		if n.Gateway, err = netip.ParseAddr(gw); err != nil {
			return n, fmt.Errorf("ethernet %s: no default route: %w", id, err)
		}
		for _, d := range eth.Nameservers.Addresses {
			a, err := netip.ParseAddr(d)
			if err != nil {
				return n, fmt.Errorf("ethernet %s: nameserver: %w", id, err)
			}
			n.DNS = append(n.DNS, a)
		}
	}
	return n, nil
}

// cardMAC is the MAC of the VM's first network card, in device order.
func cardMAC(vm mo.VirtualMachine) string {
	if vm.Config == nil {
		return ""
	}
	for _, d := range vm.Config.Hardware.Device {
		if nic, ok := d.(types.BaseVirtualEthernetCard); ok {
			return nic.GetVirtualEthernetCard().MacAddress
		}
	}
	return ""
}
