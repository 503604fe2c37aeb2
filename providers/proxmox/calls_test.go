package proxmox

import (
	"context"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// TestCallCounts reports the API calls one Create, Get (before and after
// the guest reports), ListByTag and Delete make against the fake (task
// polls included), the figures the spec quotes. It fails only if a step
// made none, which would mean it did not reach the backend.
func TestCallCounts(t *testing.T) {
	f := startFake(t)
	p := f.provider(t)
	ctx := context.Background()
	count := func(what string, fn func() error) {
		t.Helper()
		before := f.s.Calls()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		n := f.s.Calls() - before
		t.Logf("%s: %d API calls", what, n)
		if n == 0 {
			t.Errorf("%s made no call", what)
		}
	}
	var inst contract.Instance
	count("Create", func() (err error) { inst, err = p.Create(ctx, request("counted", testUID(9))); return err })
	count("Get (agent not answering)", func() error { _, err := p.Get(ctx, inst.ProviderID); return err })
	vmid, _ := vmidOf(inst.ProviderID)
	if err := f.s.ReportIP(vmid, "192.0.2.10"); err != nil {
		t.Fatal(err)
	}
	count("Get (Running)", func() error { _, err := p.Get(ctx, inst.ProviderID); return err })
	count("Get from a restarted provider", func() error { _, err := f.provider(t).Get(ctx, inst.ProviderID); return err })
	count("ListByTag", func() error { _, err := p.ListByTag(ctx, contract.LabelManaged, testOwner); return err })
	count("Delete", func() error { return p.Delete(ctx, inst.ProviderID) })

	// A static address costs no call more (address.go).
	req := request("counted-static", testUID(10))
	req.Network = testNetwork(10)
	count("Create with a static address", func() (err error) { inst, err = p.Create(ctx, req); return err })
	vmid, _ = vmidOf(inst.ProviderID)
	if err := f.s.ReportIP(vmid, "192.0.2.10"); err != nil {
		t.Fatal(err)
	}
	count("Get at a static address (Running)", func() error { _, err := p.Get(ctx, inst.ProviderID); return err })
}
