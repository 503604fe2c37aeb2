package proxmox

import (
	"context"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// A task that ends with "WARNINGS: <n>" succeeded (pve-common's
// status_is_error): a clone and a start that warned make a VM, and the
// Create succeeds with one VM, not an error and a retry.
func TestTaskWithWarningsSucceeded(t *testing.T) {
	for _, typ := range []string{"qmclone", "imgcopy", "qmstart"} {
		t.Run(typ, func(t *testing.T) {
			f := startFake(t)
			p := f.provider(t)
			f.s.WarnNextTask(typ, 2)
			inst, err := p.Create(context.Background(), request("warned", testUID(1)))
			if err != nil {
				t.Fatalf("Create with a %s task ending in WARNINGS: 2 = %v, want success", typ, err)
			}
			assertDistinct(t, f, []contract.Instance{inst})
		})
	}
}

// The exit statuses PVE calls success, and only those.
func TestTaskSucceeded(t *testing.T) {
	for exit, want := range map[string]bool{
		"OK": true, "WARNINGS: 1": true, "WARNINGS: 12": true,
		"": false, "unexpected status": false, "WARNINGS: x": false, "WARNINGS: 1 ": false,
		"clone failed: demo": false, "job errors": false,
	} {
		if got := taskSucceeded(exit); got != want {
			t.Errorf("taskSucceeded(%q) = %v, want %v", exit, got, want)
		}
	}
}
