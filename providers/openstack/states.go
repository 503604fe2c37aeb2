package openstack

import (
	"fmt"
	"maps"
	"slices"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// stateOf maps a Nova server to the contract's state (template entry 9,
// provisioning-state: native): Nova's BUILD is the never-started state,
// and task_state "deleting" marks a server on its way out whatever its
// status. The message is a short detail: a fault, or the status a
// Provisioning or Stopped server is in.
func stateOf(s servers.Server) (state contract.State, ip, message string) {
	if s.TaskState == "deleting" {
		return contract.StateTerminated, "", "task_state deleting"
	}
	switch s.Status {
	case "DELETED", "SOFT_DELETED":
		return contract.StateTerminated, "", s.Status
	case "BUILD":
		return contract.StateProvisioning, "", taskDetail(s)
	case "ACTIVE":
		if want := s.Metadata[metaAddress]; want != "" {
			// A static address (ports.go): Running with exactly it,
			// never with another address the server has.
			if have := serverAddresses(s); !slices.Contains(have, want) {
				return contract.StateProvisioning, "", fmt.Sprintf("ACTIVE; waiting for its static address %s, Nova reports %v", want, have)
			}
			return contract.StateRunning, want, ""
		}
		if ip := serverIPv4(s); ip != "" {
			return contract.StateRunning, ip, ""
		}
		return contract.StateProvisioning, "", "ACTIVE without a routable IPv4 address yet"
	case "REBOOT", "HARD_REBOOT", "REBUILD", "MIGRATING", "RESIZE", "VERIFY_RESIZE", "REVERT_RESIZE", "PASSWORD":
		// A task on a server that ran: it comes back on its own, so the
		// operator waits rather than replacing it.
		return contract.StateProvisioning, "", taskDetail(s)
	case "ERROR":
		if s.Fault.Message != "" {
			return contract.StateStopped, "", "ERROR: " + s.Fault.Message
		}
		return contract.StateStopped, "", "ERROR"
	default:
		// SHUTOFF, PAUSED, SUSPENDED, SHELVED, SHELVED_OFFLOADED, RESCUE,
		// UNKNOWN (the compute host is unreachable) and any status a
		// later Nova adds: the operator replaces the server (contract §3).
		return contract.StateStopped, "", s.Status
	}
}

func taskDetail(s servers.Server) string {
	if s.TaskState != "" {
		return s.Status + " (" + s.TaskState + ")"
	}
	return s.Status
}

// serverIPv4 is the first routable IPv4 address of the server: fixed
// addresses before floating ones, networks in name order (the API returns
// them as a JSON object, so its order is lost).
func serverIPv4(s servers.Server) string {
	return contract.FirstRoutableIPv4(serverAddresses(s))
}

// serverAddresses are the server's addresses: fixed ones before floating
// ones, networks in name order.
func serverAddresses(s servers.Server) []string {
	var fixed, floating []string
	for _, net := range slices.Sorted(maps.Keys(s.Addresses)) {
		list, _ := s.Addresses[net].([]any)
		for _, a := range list {
			m, _ := a.(map[string]any)
			addr, _ := m["addr"].(string)
			if t, _ := m["OS-EXT-IPS:type"].(string); t == "floating" {
				floating = append(floating, addr)
			} else {
				fixed = append(fixed, addr)
			}
		}
	}
	return append(fixed, floating...)
}
