package contract

// State is an instance's lifecycle state as the operator sees it (§3).
type State string

const (
	// StateProvisioning means the instance exists but is not yet usable: being
	// created, defined but never started, locked by a backend task, or
	// running without a routable IP yet. An instance that has never run is
	// always Provisioning, never Stopped.
	StateProvisioning State = "Provisioning"
	// StateRunning means the instance runs and has a routable IPv4 address in
	// Instance.IP. A running instance without one is Provisioning.
	StateRunning State = "Running"
	// StateStopped means the instance ran and is no longer running (powered off,
	// paused, suspended, crashed), or its backend state is unknown to the
	// provider's state table. The operator replaces it.
	StateStopped State = "Stopped"
	// StateTerminated means the instance is being deleted or is deleted but
	// still listed.
	StateTerminated State = "Terminated"
)

// States lists every State in lifecycle order.
var States = []State{StateProvisioning, StateRunning, StateStopped, StateTerminated}

// Valid reports whether s is one of the four states.
func (s State) Valid() bool {
	for _, known := range States {
		if s == known {
			return true
		}
	}
	return false
}
