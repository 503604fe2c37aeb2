package proxmox

import (
	"context"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// A guest agent that does not answer is no address yet, not an error:
// Get reports Provisioning whether the agent hangs on PVE's guest-ping
// ("QEMU guest agent is not running") or on the command itself (QMP's
// "got timeout"), and Running with the address once it answers.
func TestHungAgentIsProvisioning(t *testing.T) {
	for _, onPing := range []bool{true, false} {
		t.Run(map[bool]string{true: "on ping", false: "on the command"}[onPing], func(t *testing.T) {
			f := startFake(t)
			p := f.provider(t)
			ctx := context.Background()
			inst, err := p.Create(ctx, request("hung", testUID(1)))
			if err != nil {
				t.Fatal(err)
			}
			vmid, _ := vmidOf(inst.ProviderID)
			if err := f.s.ReportIP(vmid, "192.0.2.10"); err != nil {
				t.Fatal(err)
			}
			unhang, err := f.s.HangAgent(vmid, onPing)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Get(ctx, inst.ProviderID)
			if err != nil || got.State != contract.StateProvisioning || got.IP != "" {
				t.Fatalf("Get with the agent hung = %+v, %v; want Provisioning, no address, no error", got, err)
			}
			unhang()
			if got, err := p.Get(ctx, inst.ProviderID); err != nil || got.State != contract.StateRunning || got.IP != "192.0.2.10" {
				t.Errorf("Get with the agent answering = %+v, %v; want Running at 192.0.2.10", got, err)
			}
		})
	}
}

// The texts of an agent that does not answer, on PVE 8.4 and 9.x.
func TestNoAgentTexts(t *testing.T) {
	for msg, want := range map[string]bool{
		"No QEMU guest agent configured":                                          true,
		"VM 1000 is not running":                                                  true,
		"QEMU guest agent is not running":                                         true,
		"VM 1000 qmp command 'guest-network-get-interfaces' failed - got timeout": true, // 8.4
		"VM 1000 qga command 'guest-network-get-interfaces' failed - got timeout": true, // 9.x
		"VM 1000 qmp command 'guest-network-get-interfaces' failed - unable to connect to VM 1000 qga socket - timeout after 31 retries": false,
		"Permission check failed (/vms/1000, VM.GuestAgent.Audit)":                                                                       false,
	} {
		if got := isNoAgent(&APIError{StatusCode: 500, Message: msg}); got != want {
			t.Errorf("isNoAgent(%q) = %v, want %v", msg, got, want)
		}
	}
}
