package controllertest

import "testing"

// Tables as read on this machine's root namespace and in a namespace with
// only its loopback up, where the kernel keeps an unreachable IPv6
// default.
func TestDefaultRouteIn(t *testing.T) {
	const (
		header     = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
		v4Default  = header + "eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\neth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
		v4LinkOnly = header + "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
		zero       = "00000000000000000000000000000000"
		v6Reject   = zero + " 00 " + zero + " 00 " + zero + " ffffffff 00000001 00000000 00200200       lo\n"
		v6Default  = zero + " 00 " + zero + " 00 fe800000000000000000000000000001 00000400 00000001 00000000 00450003     eth0\n"
		v6Loopback = "00000000000000000000000000000001 80 " + zero + " 00 " + zero + " 00000000 00000002 00000000 80200001       lo\n"
	)
	for _, c := range []struct {
		name   string
		v4, v6 string
		want   bool
	}{
		{"IPv4 default", v4Default, v6Reject, true},
		{"IPv6 default only", header, v6Default, true},
		{"a namespace's loopback only", header, v6Loopback + v6Reject, false},
		{"a link route only", v4LinkOnly, v6Reject, false},
	} {
		if got := defaultRouteIn(c.v4, c.v6); got != c.want {
			t.Errorf("%s: defaultRouteIn = %v, want %v", c.name, got, c.want)
		}
	}
}
