package openstack

import (
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

func TestStateTable(t *testing.T) {
	addrs := func(pairs ...string) map[string]any {
		out := map[string]any{}
		for i := 0; i < len(pairs); i += 3 {
			list, _ := out[pairs[i]].([]any)
			out[pairs[i]] = append(list, map[string]any{"addr": pairs[i+1], "OS-EXT-IPS:type": pairs[i+2], "version": 4.0})
		}
		return out
	}
	srv := func(status, task string, a map[string]any) servers.Server {
		return servers.Server{Status: status, TaskState: task, Addresses: a}
	}
	withIP := addrs("private", "fe80::1", "fixed", "private", "10.0.0.7", "fixed")
	for _, tc := range []struct {
		name   string
		s      servers.Server
		want   contract.State
		wantIP string
	}{
		{"BUILD scheduling", srv("BUILD", "scheduling", nil), contract.StateProvisioning, ""},
		{"BUILD spawning with an address", srv("BUILD", "spawning", withIP), contract.StateProvisioning, ""},
		{"ACTIVE without an address", srv("ACTIVE", "", nil), contract.StateProvisioning, ""},
		{"ACTIVE, loopback and link-local only", srv("ACTIVE", "", addrs("private", "127.0.0.1", "fixed", "private", "169.254.1.1", "fixed")), contract.StateProvisioning, ""},
		{"ACTIVE with an address", srv("ACTIVE", "", withIP), contract.StateRunning, "10.0.0.7"},
		{"ACTIVE, fixed before floating", srv("ACTIVE", "", addrs("private", "203.0.113.9", "floating", "private", "10.0.0.8", "fixed")), contract.StateRunning, "10.0.0.8"},
		{"ACTIVE, networks in name order", srv("ACTIVE", "", addrs("zeta", "10.9.0.1", "fixed", "alpha", "10.1.0.1", "fixed")), contract.StateRunning, "10.1.0.1"},
		{"REBOOT", srv("REBOOT", "reboot_started", withIP), contract.StateProvisioning, ""},
		{"SHUTOFF", srv("SHUTOFF", "", withIP), contract.StateStopped, ""},
		{"PAUSED", srv("PAUSED", "", withIP), contract.StateStopped, ""},
		{"SUSPENDED", srv("SUSPENDED", "", withIP), contract.StateStopped, ""},
		{"SHELVED_OFFLOADED", srv("SHELVED_OFFLOADED", "", nil), contract.StateStopped, ""},
		{"ERROR", servers.Server{Status: "ERROR", Fault: servers.Fault{Code: 500, Message: "No valid host was found. "}}, contract.StateStopped, ""},
		{"UNKNOWN (compute host down)", srv("UNKNOWN", "", withIP), contract.StateStopped, ""},
		{"a status Nova may add", srv("HIBERNATED", "", withIP), contract.StateStopped, ""},
		{"ACTIVE, task_state deleting", srv("ACTIVE", "deleting", withIP), contract.StateTerminated, ""},
		{"BUILD, task_state deleting", srv("BUILD", "deleting", nil), contract.StateTerminated, ""},
		{"ERROR, task_state deleting", srv("ERROR", "deleting", nil), contract.StateTerminated, ""},
		{"DELETED", srv("DELETED", "", nil), contract.StateTerminated, ""},
		{"SOFT_DELETED", srv("SOFT_DELETED", "", nil), contract.StateTerminated, ""},
	} {
		state, ip, _ := stateOf(tc.s)
		if state != tc.want || ip != tc.wantIP {
			t.Errorf("%s: %s %q, want %s %q", tc.name, state, ip, tc.want, tc.wantIP)
		}
	}
	if _, _, msg := stateOf(servers.Server{Status: "ERROR", Fault: servers.Fault{Message: "Build of instance x aborted"}}); msg != "ERROR: Build of instance x aborted" {
		t.Errorf("an ERROR server's message is %q, want its fault", msg)
	}
}
