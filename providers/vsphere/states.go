package vsphere

import (
	"slices"

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
//
// A VM made for a static address (markAddress) is Running only at that
// address (staticState, contract §2.2); the third result is the Message
// saying what it waits for.
func stateOf(vm vmRead) (contract.State, string, string) {
	if vm.destroying {
		return contract.StateTerminated, "", ""
	}
	switch vm.Runtime.PowerState {
	case types.VirtualMachinePowerStatePoweredOn:
		if want := extra(vm.VirtualMachine)[markAddress]; want != "" {
			return staticState(vm.Guest, want)
		}
		if ip := contract.FirstRoutableIPv4(guestIPs(vm.Guest)); ip != "" {
			return contract.StateRunning, ip, ""
		}
		return contract.StateProvisioning, "", ""
	case types.VirtualMachinePowerStatePoweredOff:
		if extra(vm.VirtualMachine)[markStarted] == "true" {
			return contract.StateStopped, "", ""
		}
		return contract.StateProvisioning, "", ""
	default:
		// suspended, and any state a later vSphere adds: the operator
		// replaces the VM rather than waiting (contract §3).
		return contract.StateStopped, "", ""
	}
}

// guestIPs are the addresses VMware Tools report: the NICs' addresses in
// device order, then guest.ipAddress.
func guestIPs(g *types.GuestInfo) []string {
	if g == nil {
		return nil
	}
	var ips []string
	for _, nic := range g.Net {
		ips = append(ips, nic.IpAddress...)
	}
	if g.IpAddress != "" && !slices.Contains(ips, g.IpAddress) {
		ips = append(ips, g.IpAddress)
	}
	return ips
}
