package proxmox

import (
	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// vmState is what the state table reads: status/current's status,
// qmpstatus and lock, and the started mark.
type vmState struct {
	status  string // running, stopped
	qmp     string // QEMU's run state while running
	lock    string
	started bool
}

// stateOf maps a VM to the contract's state (template entry 9,
// provisioning-state: marker + lock). ip is the guest agent's first
// routable IPv4 address, "" when there is none.
func stateOf(s vmState, ip string) contract.State {
	switch s.lock {
	case "destroyed":
		// qmdestroy replaced the config with only this lock.
		return contract.StateTerminated
	case "clone", "create":
		// Still being made: never run.
		return contract.StateProvisioning
	case "suspended", "suspending":
		// Hibernated to disk: it ran.
		return contract.StateStopped
	}
	// Other locks (backup, migrate, snapshot, rollback) do not change
	// whether the VM runs.
	switch s.status {
	case "running":
		switch s.qmp {
		case "", "running":
			if ip != "" {
				return contract.StateRunning
			}
			return contract.StateProvisioning
		case "prelaunch", "inmigrate":
			// QEMU is up and about to run the guest.
			return contract.StateProvisioning
		default:
			// paused, suspended, internal-error, io-error, guest-panicked,
			// shutdown, and any state QEMU adds: not serving (contract §3).
			return contract.StateStopped
		}
	case "stopped":
		if s.started {
			return contract.StateStopped
		}
		return contract.StateProvisioning
	case "unknown":
		// /cluster/resources before pvestatd's first update of a new
		// VMID (pve-manager API2Tools.pm extract_vm_stats), or a node
		// that stopped reporting: a VM never started is still being
		// made; one that ran is not known to serve.
		if !s.started {
			return contract.StateProvisioning
		}
		return contract.StateStopped
	default:
		return contract.StateStopped
	}
}

// agentIPv4 is the routable IPv4 addresses the guest agent reports
// (contract.RoutableIPv4, in dotted-quad form), NICs in its order ("lo" is
// dropped by go-proxmox), addresses in theirs: the first is Get's address
// unless ipconfig0 records one (address.go atAddress).
func agentIPv4(ifaces []agentIface) []string {
	var out []string
	for _, nic := range ifaces {
		for _, ip := range nic.ips {
			if contract.RoutableIPv4(ip) {
				out = append(out, contract.FirstRoutableIPv4([]string{ip}))
			}
		}
	}
	return out
}

type agentIface struct {
	name string
	ips  []string
}
