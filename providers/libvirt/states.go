package libvirt

import (
	"libvirt.org/go/libvirt"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// stateOf maps a domain to the contract's state (template entry 9,
// provisioning-state: marker). A shut-off domain is Provisioning until
// the started mark says it has been started, so a defined domain not yet
// started is never taken for a stopped one; libvirt's own shut-off reason
// cannot tell, since a restarted daemon reports every inactive domain
// with reason "unknown".
func stateOf(d domain) (contract.State, string) {
	switch d.state {
	case libvirt.DOMAIN_RUNNING, libvirt.DOMAIN_BLOCKED:
		if d.ip != "" {
			return contract.StateRunning, d.ip
		}
		return contract.StateProvisioning, ""
	case libvirt.DOMAIN_PAUSED:
		if d.reason == int(libvirt.DOMAIN_PAUSED_STARTING_UP) {
			// QEMU is still being set up by the start itself.
			return contract.StateProvisioning, ""
		}
		// Paused by a person, an I/O error, a failed KVM entry ("paused
		// (unknown)"): the operator replaces it (contract §3).
		return contract.StateStopped, ""
	case libvirt.DOMAIN_SHUTOFF:
		if d.marks.started() {
			return contract.StateStopped, ""
		}
		return contract.StateProvisioning, ""
	default:
		// shutdown (being shut down), crashed, pmsuspended, nostate, and
		// any state a later libvirt adds.
		return contract.StateStopped, ""
	}
}
