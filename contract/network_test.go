package contract

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestStaticNetworkValidate(t *testing.T) {
	good := StaticNetwork{
		Address: netip.MustParsePrefix("192.0.2.10/24"),
		Gateway: netip.MustParseAddr("192.0.2.1"),
		DNS:     []netip.Addr{netip.MustParseAddr("192.0.2.53"), netip.MustParseAddr("2001:db8::53")},
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("a good network: %v", err)
	}
	if ip := good.IP(); ip != "192.0.2.10" {
		t.Errorf("IP() = %q", ip)
	}
	p2p := StaticNetwork{Address: netip.MustParsePrefix("198.51.100.1/31"), Gateway: netip.MustParseAddr("198.51.100.0")}
	if err := p2p.Validate(); err != nil {
		t.Errorf("a /31 (RFC 3021) may use both addresses: %v", err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*StaticNetwork)
		field string
	}{
		{"zero address", func(n *StaticNetwork) { n.Address = netip.Prefix{} }, "network.address"},
		{"IPv6", func(n *StaticNetwork) { n.Address = netip.MustParsePrefix("2001:db8::10/64") }, "network.address"},
		{"loopback", func(n *StaticNetwork) { n.Address = netip.MustParsePrefix("127.0.0.2/8") }, "network.address"},
		{"prefix /7", func(n *StaticNetwork) { n.Address = netip.MustParsePrefix("10.0.0.10/7") }, "network.address"},
		{"network address", func(n *StaticNetwork) { n.Address = netip.MustParsePrefix("192.0.2.0/24") }, "network.address"},
		{"broadcast", func(n *StaticNetwork) { n.Address = netip.MustParsePrefix("192.0.2.255/24") }, "network.address"},
		{"no gateway", func(n *StaticNetwork) { n.Gateway = netip.Addr{} }, "network.gateway"},
		{"gateway outside", func(n *StaticNetwork) { n.Gateway = netip.MustParseAddr("198.51.100.1") }, "network.gateway"},
		{"gateway is the address", func(n *StaticNetwork) { n.Gateway = netip.MustParseAddr("192.0.2.10") }, "network.gateway"},
		{"four resolvers", func(n *StaticNetwork) {
			n.DNS = append(n.DNS, netip.MustParseAddr("192.0.2.54"), netip.MustParseAddr("192.0.2.55"))
		}, "network.dns"},
		{"unspecified resolver", func(n *StaticNetwork) { n.DNS = []netip.Addr{netip.IPv4Unspecified()} }, "network.dns[0]"},
	} {
		n := good
		n.DNS = append([]netip.Addr(nil), good.DNS...)
		tc.edit(&n)
		err := n.Validate()
		var fe *FieldError
		if !errors.Is(err, ErrPermanent) || !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: Validate = %v, want ErrPermanent naming %s", tc.name, err, tc.field)
		}
	}
	req := CreateRequest{Name: "a", UID: "b", Owner: "c", Port: 3128, Network: &StaticNetwork{Address: netip.MustParsePrefix("192.0.2.0/24")}}
	if err := req.Validate(); err == nil || !strings.Contains(err.Error(), "network.address") {
		t.Errorf("CreateRequest.Validate with a bad network = %v", err)
	}
}
