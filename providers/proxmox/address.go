package proxmox

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	pve "github.com/luthermonson/go-proxmox"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// The static address (contract §2.2, spec entry 7). The guest reads it
// from the seed's network-config (images/nocloud.NetworkConfig, matched by
// net0's MAC): PVE renders its own cloud-init settings only onto a
// vm-<vmid>-cloudinit drive (qemu-server Cloudinit.pm
// generate_cloudinit_config), and the provider's seed is an ISO of its own
// because user-data must arrive byte for byte, which PVE's generated
// user-data does not, and a cicustom snippet cannot be uploaded through
// the API (pve-storage API2/Storage/Status.pm upload: content iso, vztmpl,
// import). The same address is written as PVE's cloud-init settings,
// ipconfig0 and nameserver, in the config write that attaches the seed:
// they are the record on the backend that Get reads (with the config it
// reads anyway), that a restarted provider finds, and that PVE's web UI
// shows under Cloud-Init.

// ipconfig0 is the network as qemu-server's pve-qm-ipconfig
// ($ipconfig_fmt): "ip=192.0.2.10/24,gw=192.0.2.1".
func ipconfig0(n contract.StaticNetwork) string {
	return "ip=" + n.Address.String() + ",gw=" + n.Gateway.String()
}

// nameserver is the resolvers as PVE's nameserver option takes them: an
// address-list, which Cloudinit.pm get_dns_conf splits on white space.
func nameserver(n contract.StaticNetwork) string {
	s := make([]string, len(n.DNS))
	for i, d := range n.DNS {
		s[i] = d.String()
	}
	return strings.Join(s, " ")
}

// addressOptions are the config write's cloud-init settings for the
// request: ipconfig0 and nameserver set to the request's, and whichever of
// them the clone carries from its template and the request does not set
// deleted, so the VM's record is the request and nothing else (a template's
// own address is never waited for). PVE refuses to set and delete one key
// in one write (update_vm), which this never does.
func addressOptions(n *contract.StaticNetwork, conf func(string) string) []pve.VirtualMachineOption {
	want := map[string]string{}
	if n != nil {
		want["ipconfig0"] = ipconfig0(*n)
		if len(n.DNS) > 0 {
			want["nameserver"] = nameserver(*n)
		}
	}
	var opts []pve.VirtualMachineOption
	var del []string
	for _, k := range []string{"ipconfig0", "nameserver"} {
		switch v, ok := want[k]; {
		case ok:
			opts = append(opts, pve.VirtualMachineOption{Name: k, Value: v})
		case conf(k) != "":
			del = append(del, k)
		}
	}
	if len(del) > 0 {
		opts = append(opts, pve.VirtualMachineOption{Name: "delete", Value: strings.Join(del, ",")})
	}
	return opts
}

// requestedIP is the static IPv4 address a VM's ipconfig0 records, "" when
// it records none (no ipconfig0, dhcp, manual, or only IPv6).
func requestedIP(ipconfig string) string {
	for _, part := range strings.Split(ipconfig, ",") {
		if v, ok := strings.CutPrefix(part, "ip="); ok {
			if p, err := netip.ParsePrefix(v); err == nil && p.Addr().Is4() {
				return p.Addr().String()
			}
		}
	}
	return ""
}

// macOf reads the MAC of a NIC's property string (qemu-server
// QemuServer/Network.pm $net_fmt: "<model>=<MAC>,…", or macaddr=<MAC>).
func macOf(net0 string) (string, bool) {
	for _, part := range strings.Split(net0, ",") {
		if _, v, ok := strings.Cut(part, "="); ok {
			if hw, err := net.ParseMAC(v); err == nil && len(hw) == 6 {
				return hw.String(), true
			}
		}
	}
	return "", false
}

// awaiting is Get's Message while a running VM's guest agent does not
// report the address ipconfig0 records.
func awaiting(want string, reported []string) string {
	if len(reported) == 0 {
		return fmt.Sprintf("waiting for the guest agent to report %s (ipconfig0); it reports no IPv4 address yet", want)
	}
	return fmt.Sprintf("waiting for the guest agent to report %s (ipconfig0); it reports %s", want, strings.Join(reported, ", "))
}

// atAddress picks Get's address: with a recorded address, that one if the
// agent reports it among its routable IPv4 addresses (else none, and the
// Message says why); without, the first routable IPv4 as before.
func atAddress(want string, reported []string) (ip, message string) {
	if want == "" {
		if len(reported) > 0 {
			return reported[0], ""
		}
		return "", ""
	}
	if slices.Contains(reported, want) {
		return want, ""
	}
	return "", awaiting(want, reported)
}
