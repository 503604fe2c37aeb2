package proxmox

import (
	"strconv"
	"strings"
)

// net0 renders the zone's network onto the clone's net0. net0 is a PVE
// property string (qemu-server QemuServer/Network.pm $net_fmt, printed by
// print_net): "<model>=<MAC>,bridge=…,tag=…,firewall=1,…". The clone's
// model and MAC stay (clone_vm gives every clone a new MAC, and a second
// write without it would make PVE draw another one), and so does every
// option the zone does not set (queues, rate, link_down, trunks). bridge
// and tag are the network's identity and are always written (no vlan: no
// tag); mtu and firewall only when the zone sets them.
func (n Network) net0(current string) string {
	set := map[string]string{"bridge": n.Bridge}
	if n.VLAN != 0 {
		set["tag"] = strconv.Itoa(n.VLAN)
	}
	if n.MTU != 0 {
		set["mtu"] = strconv.Itoa(n.MTU)
	}
	if n.Firewall != nil {
		set["firewall"] = "0"
		if *n.Firewall {
			set["firewall"] = "1"
		}
	}
	var out []string
	written := map[string]bool{}
	for _, part := range strings.Split(current, ",") {
		key, _, _ := strings.Cut(part, "=")
		switch {
		case part == "":
			continue
		case key == "tag" && n.VLAN == 0:
			continue
		case set[key] != "":
			part = key + "=" + set[key]
			written[key] = true
		}
		out = append(out, part)
	}
	for _, key := range []string{"bridge", "tag", "mtu", "firewall"} {
		if v := set[key]; v != "" && !written[key] {
			out = append(out, key+"="+v)
		}
	}
	return strings.Join(out, ",")
}
