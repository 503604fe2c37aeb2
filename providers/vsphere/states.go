package vsphere

import (
	"github.com/vmware/govmomi/vim25/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// stateOf maps a VM to the contract's state (template entry 9,
// provisioning-state: marker). A VM a destroy task is under way on, or
// that a Delete is powering off (Provider.instance), is Terminated,
// whatever its power state. vSphere's power state has three
// values; a powered-off VM is Provisioning until markStarted says it has
// been started, so a clone not yet powered on is never taken for a
// stopped VM.
func stateOf(vm vmRead) (contract.State, string) {
	if vm.destroying {
		return contract.StateTerminated, ""
	}
	switch vm.Runtime.PowerState {
	case types.VirtualMachinePowerStatePoweredOn:
		if ip := guestIPv4(vm.Guest); ip != "" {
			return contract.StateRunning, ip
		}
		return contract.StateProvisioning, ""
	case types.VirtualMachinePowerStatePoweredOff:
		if extra(vm.VirtualMachine)[markStarted] == "true" {
			return contract.StateStopped, ""
		}
		return contract.StateProvisioning, ""
	default:
		// suspended, and any state a later vSphere adds: the operator
		// replaces the VM rather than waiting (contract §3).
		return contract.StateStopped, ""
	}
}

// guestIPv4 is the first routable IPv4 address VMware Tools reports: the
// NICs' addresses in device order, then guest.ipAddress.
func guestIPv4(g *types.GuestInfo) string {
	if g == nil {
		return ""
	}
	var ips []string
	for _, nic := range g.Net {
		ips = append(ips, nic.IpAddress...)
	}
	return contract.FirstRoutableIPv4(append(ips, g.IpAddress))
}
