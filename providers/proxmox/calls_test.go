package proxmox

import (
	"context"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// TestCallCounts holds the API calls one Create, Get (before and after
// the guest reports), ListByTag and Delete make against the fake to the
// figures the spec quotes, task polls left out (it asserted nothing but
// "at least one call" before: an added call per Delete passed).
func TestCallCounts(t *testing.T) {
	f := startFake(t)
	p := f.provider(t)
	ctx := context.Background()
	// count runs fn and wants exactly want calls besides task polls (the
	// polls depend on when the fake's task ends: see
	// CallsBesidesTaskPolls). Each figure is the spec's (entry 21):
	// a change in the calls an operation makes fails here, and updates
	// the spec with it.
	count := func(what string, want int, fn func() error) {
		t.Helper()
		before, polls := f.s.Calls(), f.s.CallsBesidesTaskPolls()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		n := f.s.CallsBesidesTaskPolls() - polls
		t.Logf("%s: %d API calls, %d besides task polls", what, f.s.Calls()-before, n)
		if n != want {
			t.Errorf("%s made %d calls besides task polls, want %d", what, n, want)
		}
	}
	var inst contract.Instance
	count("Create", 10, func() (err error) { inst, err = p.Create(ctx, request("counted", testUID(9))); return err })
	count("Get (agent not answering)", 3, func() error { _, err := p.Get(ctx, inst.ProviderID); return err })
	vmid, _ := vmidOf(inst.ProviderID)
	if err := f.s.ReportIP(vmid, "192.0.2.10"); err != nil {
		t.Fatal(err)
	}
	count("Get (Running)", 3, func() error { _, err := p.Get(ctx, inst.ProviderID); return err })
	count("Get from a restarted provider", 4, func() error { _, err := f.provider(t).Get(ctx, inst.ProviderID); return err })
	count("ListByTag", 1, func() error { _, err := p.ListByTag(ctx, contract.LabelManaged, testOwner); return err })
	count("Delete", 7, func() error { return p.Delete(ctx, inst.ProviderID) })

	// A static address costs no call more (address.go).
	req := request("counted-static", testUID(10))
	req.Network = testNetwork(10)
	count("Create with a static address", 10, func() (err error) { inst, err = p.Create(ctx, req); return err })
	vmid, _ = vmidOf(inst.ProviderID)
	if err := f.s.ReportIP(vmid, "192.0.2.10"); err != nil {
		t.Fatal(err)
	}
	count("Get at a static address (Running)", 3, func() error { _, err := p.Get(ctx, inst.ProviderID); return err })
}
