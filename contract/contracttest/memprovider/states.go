package memprovider

import (
	"slices"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// stateOf maps a Cloud VM to the contract's state (template entry 9,
// provisioning-state: native). The order of the cases is the table's: a
// deleting VM is Terminated whatever its power; a VM that never ran is
// Provisioning whatever lock it holds; a running VM needs a routable IPv4.
func stateOf(vm VM) (contract.State, string) {
	switch {
	case vm.Deleting:
		return contract.StateTerminated, ""
	case !vm.Started:
		return contract.StateProvisioning, ""
	}
	switch vm.Power {
	case "running":
		if vm.Network != nil {
			// A static address: Running only once the guest has exactly
			// it, never with an address DHCP handed out (contract §2.2).
			if want := vm.Network.IP(); slices.Contains(vm.IPs, want) {
				return contract.StateRunning, want
			}
			return contract.StateProvisioning, ""
		}
		if ip := contract.FirstRoutableIPv4(vm.IPs); ip != "" {
			return contract.StateRunning, ip
		}
		return contract.StateProvisioning, ""
	case "stopped", "paused":
		return contract.StateStopped, ""
	default:
		// An unknown backend state is Stopped (contract §3): the operator
		// replaces the instance rather than waiting forever.
		return contract.StateStopped, ""
	}
}
