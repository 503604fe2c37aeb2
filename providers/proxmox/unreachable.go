package proxmox

import (
	"context"
	"errors"
	"fmt"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// A node the API node cannot reach (pveproxy's 595) holds its VMs' config
// and disks: nothing can be read from the VM or done to it until the node
// is back, or until an admin moves the VM's config to another node (HA
// fencing does). The cluster still lists the VM, with its tags, as pmxcfs
// keeps them (pve-manager PVE/API2/Cluster.pm resources). Get reports it
// from that list, Stopped: a state unknown to the provider is Stopped
// (contract §3), so the operator takes a serving VM there out of the
// Service, and a lone replica's Proxy says why it is not Ready. Delete
// cannot run: a transient error naming the node (contract §4.9: nil only
// for a VM gone or going). docs/proxmox-provider-spec.md entry 9.

// statusNodeUnreachable is pveproxy's status for a call it forwards to a
// node it cannot connect to (AnyEvent::HTTP's 595, "errors during
// connection establishment"; pve-http-server AnyEvent.pm proxy_request
// passes it on). 596 (the answer lost after sending) is not it: the call
// may have run.
const statusNodeUnreachable = 595

// isNodeUnreachable reports whether err is a call pveproxy could not
// forward to its node.
func isNodeUnreachable(err error) bool {
	api := (*APIError)(nil)
	return errors.As(err, &api) && api.StatusCode == statusNodeUnreachable
}

// onUnreachableNode is Get's answer for VM vmid of region when reading it
// failed with cause, its node unreachable: the VM as the cluster lists it,
// Stopped when it ever ran (Provisioning when it never did, contract §3),
// the node named in the message. A VM the list places on another node
// (migrated) is read there. Without the marks in the list's tags (tag
// access refused, tagaccess.go) nothing says it is this operator's, and
// cause is the answer.
func (p *Provider) onUnreachableNode(ctx context.Context, region string, vmid int, cause error) (contract.Instance, error) {
	vms, err := p.resources(ctx, region)
	if err != nil {
		return contract.Instance{}, err
	}
	for _, r := range vms {
		if !isVM(r) || int(r.VMID) != vmid {
			continue
		}
		m := readMarks(r.Tags, "")
		if !m.tagged || !m.managed() {
			return contract.Instance{}, cause
		}
		// The list's status is what pvestatd last saw, not what the VM
		// does now.
		v := vmInfo{region: region, node: r.Node, vmid: vmid, status: vmStatus{Name: r.Name, Status: "unknown"}, marks: m}
		inst := p.instance(v, "")
		inst.Message = fmt.Sprintf("node %s is unreachable: the VM's state is unknown until it is back", r.Node)
		return inst, nil
	}
	return contract.Instance{}, contract.NotFound(fmt.Errorf("no VM %d in region %s", vmid, region))
}

// nodeUnreachable explains a Delete's failure on a VM whose node cannot
// be reached; the error stays transient.
func nodeUnreachable(node string, err error) error {
	return fmt.Errorf("node %s is unreachable: the VM can be deleted once the node is back, or once its config is moved to a node that is up (HA fencing does): %w", node, err)
}
