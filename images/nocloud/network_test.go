package nocloud

import (
	"errors"
	"net/netip"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

func TestNetworkConfig(t *testing.T) {
	n := contract.StaticNetwork{
		Address: netip.MustParsePrefix("192.0.2.10/24"),
		Gateway: netip.MustParseAddr("192.0.2.1"),
		DNS:     []netip.Addr{netip.MustParseAddr("192.0.2.53")},
	}
	out, err := NetworkConfig(n, "52:54:00:AB:cd:01")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Version   int
		Ethernets map[string]struct {
			Match       map[string]string
			SetName     string `yaml:"set-name"`
			DHCP4       bool
			Addresses   []string
			Gateway4    string
			Routes      []struct{ To, Via string }
			Nameservers struct{ Addresses []string }
		}
	}
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v in\n%s", err, out)
	}
	eth := got.Ethernets["eth0"]
	if got.Version != 2 || len(got.Ethernets) != 1 || eth.Match["macaddress"] != "52:54:00:ab:cd:01" || eth.SetName != "eth0" || eth.DHCP4 ||
		len(eth.Addresses) != 1 || eth.Addresses[0] != "192.0.2.10/24" ||
		eth.Gateway4 != "192.0.2.1" || len(eth.Routes) != 0 ||
		len(eth.Nameservers.Addresses) != 1 || eth.Nameservers.Addresses[0] != "192.0.2.53" {
		t.Errorf("network-config:\n%s", out)
	}
	if _, err := NetworkConfig(n, "52:54:00"); !errors.Is(err, contract.ErrPermanent) {
		t.Errorf("a short MAC: %v, want ErrPermanent", err)
	}
	n.Gateway = netip.MustParseAddr("198.51.100.1")
	if _, err := NetworkConfig(n, "52:54:00:ab:cd:01"); !errors.Is(err, contract.ErrPermanent) {
		t.Errorf("a gateway outside: %v, want ErrPermanent", err)
	}
}
