package contract_test

import (
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

func TestRoutableIPv4(t *testing.T) {
	for ip, want := range map[string]bool{
		"192.0.2.10":       true,
		"10.1.2.3":         true,
		"::ffff:10.1.2.3":  true,
		"127.0.0.1":        false,
		"169.254.10.1":     false,
		"0.0.0.0":          false,
		"224.0.0.1":        false,
		"2001:db8::1":      false,
		"fe80::1":          false,
		"":                 false,
		"not-an-address":   false,
		"192.0.2.10/24":    false,
		"255.255.255.255x": false,
		"255.255.255.255":  false,
		"240.0.0.1":        false,
		"0.1.2.3":          false,
		"223.255.255.254":  true,
	} {
		if got := contract.RoutableIPv4(ip); got != want {
			t.Errorf("RoutableIPv4(%q) = %v, want %v", ip, got, want)
		}
	}
	if got := contract.FirstRoutableIPv4([]string{"fe80::1", "127.0.0.1", "::ffff:10.0.0.5", "10.0.0.6"}); got != "10.0.0.5" {
		t.Errorf("FirstRoutableIPv4 = %q, want 10.0.0.5", got)
	}
}
