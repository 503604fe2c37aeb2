package pvefake

import "fmt"

// container is an LXC container: the fake serves none of its API, only
// what a QEMU client meets of one. PVE lists containers with the VMs in
// /cluster/resources?type=vm (pve-manager PVE/API2/Cluster.pm resources:
// every guest of the cluster's vmlist, "type" qemu or lxc), and VMIDs are
// one space for both (pve-cluster PVE/Cluster.pm check_vmid_unused).
// Under /nodes/<node>/qemu/<vmid> a container's VMID is unknown, as any
// VMID without a qemu-server config.
type container struct {
	vmid     int
	node     string
	name     string
	template bool
}

func (c *container) resource() map[string]any {
	return map[string]any{"id": fmt.Sprintf("lxc/%d", c.vmid), "type": "lxc", "vmid": c.vmid, "node": c.node,
		"name": c.name, "status": "stopped", "template": b2i(c.template), "maxcpu": 1, "maxmem": 512 << 20, "maxdisk": 8 << 30}
}

// vmidUsed reports whether a VM or a container has the VMID.
func (s *Server) vmidUsed(id int) bool {
	_, vm := s.vms[id]
	_, ct := s.cts[id]
	return vm || ct
}

// AddContainer puts an LXC container (a container template if template)
// named name on node under vmid, as `pct create` (or `pct template`)
// would.
func (s *Server) AddContainer(vmid int, node, name string, template bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cts[vmid] = &container{vmid: vmid, node: node, name: name, template: template}
}
