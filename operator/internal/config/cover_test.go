package config

import (
	"net/netip"
	"testing"
)

func TestCoversAll(t *testing.T) {
	parse := func(cidrs ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, c := range cidrs {
			out = append(out, netip.MustParsePrefix(c))
		}
		return out
	}
	for _, tc := range []struct {
		cidrs  []string
		v4, v6 bool
	}{
		{[]string{"0.0.0.0/1", "128.0.0.0/1"}, true, false},
		{[]string{"128.0.0.0/1", "0.0.0.0/1"}, true, false},
		{[]string{"0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/2"}, true, false},
		{[]string{"0.0.0.0/1", "128.0.0.0/2", "224.0.0.0/3"}, false, false}, // 192/3 missing
		{[]string{"0.0.0.0/1", "0.0.0.0/2", "128.0.0.0/1"}, true, false},    // overlapping
		{[]string{"0.0.0.0/1"}, false, false},
		{[]string{"128.0.0.0/1"}, false, false},
		{[]string{"10.0.0.0/8"}, false, false},
		{[]string{"::/1", "8000::/1"}, false, true},
		{[]string{"::/1", "8000::/2"}, false, false},
		{[]string{"0.0.0.0/0"}, true, false},
		{nil, false, false},
	} {
		p := parse(tc.cidrs...)
		if got := CoversAll(p, true); got != tc.v4 {
			t.Errorf("CoversAll(%v, IPv4) = %v", tc.cidrs, got)
		}
		if got := CoversAll(p, false); got != tc.v6 {
			t.Errorf("CoversAll(%v, IPv6) = %v", tc.cidrs, got)
		}
	}
	if got := lastAddr(netip.MustParsePrefix("10.1.2.0/23")); got != netip.MustParseAddr("10.1.3.255") {
		t.Errorf("lastAddr(10.1.2.0/23) = %v", got)
	}
}
