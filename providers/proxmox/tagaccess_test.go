package proxmox

import (
	"context"
	"fmt"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/providers/proxmox/pvefake"
)

// Under datacenter.cfg's user-tag-access list, existing and none PVE
// refuses the per-Proxy tags (uid, ctime) to a token without Sys.Modify
// on / (pve-guest-common GuestHelpers.pm assert_tag_permissions). The
// provider still works: the marks stay in the description the clone
// writes, the tags carry what the cluster allows, and Get, ListByTag and
// Delete read the description where the tags lack the marks.
func TestTagAccessModes(t *testing.T) {
	allowList := []string{tagManaged, tagStarted, tagOwner + testOwner}
	for _, tc := range []struct {
		name   string
		access pvefake.TagAccess
		// wantTags are the tags the VM ends with.
		wantTags string
	}{
		{"list, the fixed marks allowed", pvefake.TagAccess{UserAllow: "list", UserAllowList: allowList}, tagManaged + ";" + tagOwner + testOwner + ";" + tagStarted},
		{"list, nothing allowed", pvefake.TagAccess{UserAllow: "list"}, ""},
		{"existing, nothing yet", pvefake.TagAccess{UserAllow: "existing"}, ""},
		{"none, even with a list", pvefake.TagAccess{UserAllow: "none", UserAllowList: allowList}, ""},
		{"free, the managed mark registered", pvefake.TagAccess{Registered: []string{tagManaged}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFakeWith(t, func(o *pvefake.Options) { o.TagAccess = tc.access }, func(*Config) {})
			p := f.provider(t)
			ctx := context.Background()
			req := request("restricted", testUID(1))
			inst, err := p.Create(ctx, req)
			if err != nil {
				t.Fatalf("Create under user-tag-access %s: %v", tc.name, err)
			}
			vmid, _ := vmidOf(inst.ProviderID)
			conf, _ := f.s.Config(vmid)
			if conf["tags"] != tc.wantTags {
				t.Errorf("VM %d's tags = %q, want %q", vmid, conf["tags"], tc.wantTags)
			}
			if err := f.s.ReportIP(vmid, "192.0.2.20"); err != nil {
				t.Fatal(err)
			}
			got, err := p.Get(ctx, inst.ProviderID)
			if err != nil || got.State != contract.StateRunning || got.UID != req.UID || got.Owner != testOwner || got.CreatedAt.IsZero() {
				t.Errorf("Get = %+v, %v; want Running with UID, Owner and CreatedAt", got, err)
			}
			for _, filter := range [][2]string{{contract.LabelManaged, testOwner}, {contract.LabelUID, req.UID}} {
				list, err := p.ListByTag(ctx, filter[0], filter[1])
				if err != nil || len(list) != 1 || list[0].ProviderID != inst.ProviderID || list[0].UID != req.UID || list[0].Owner != testOwner || list[0].CreatedAt.IsZero() {
					t.Errorf("ListByTag(%s, %s) = %+v, %v; want the VM with its UID, Owner and CreatedAt", filter[0], filter[1], list, err)
				}
			}
			if list, err := p.ListByTag(ctx, contract.LabelManaged, otherOwner); err != nil || len(list) != 0 {
				t.Errorf("ListByTag for another owner = %+v, %v; want none", list, err)
			}
			again, err := f.provider(t).Create(ctx, req)
			if err != nil || again.ProviderID != inst.ProviderID {
				t.Errorf("repeat Create = %+v, %v; want %s", again, err, inst.ProviderID)
			}
			if err := p.Delete(ctx, inst.ProviderID); err != nil {
				t.Fatal(err)
			}
			f.s.WaitTasks()
			if left := f.s.Inventory(); len(left) != 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

// TestTagAccessCallCounts reports what a restricted tag access costs, the
// figures the spec quotes: Create's extra PUTs the first time, and
// ListByTag's config reads per VM (two calls each: status and config).
func TestTagAccessCallCounts(t *testing.T) {
	const vms = 3
	for _, mode := range []string{"free", "list", "none"} {
		t.Run(mode, func(t *testing.T) {
			access := pvefake.TagAccess{UserAllow: mode}
			if mode == "list" {
				access.UserAllowList = []string{tagManaged, tagStarted, tagOwner + testOwner}
			}
			f := startFakeWith(t, func(o *pvefake.Options) { o.TagAccess = access }, func(*Config) {})
			p := f.provider(t)
			ctx := context.Background()
			for i := range vms {
				before := f.s.Calls()
				if _, err := p.Create(ctx, request(fmt.Sprintf("counted-%d", i), testUID(i))); err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: Create %d: %d API calls", mode, i+1, f.s.Calls()-before)
			}
			for _, filter := range [][2]string{{contract.LabelManaged, testOwner}, {contract.LabelUID, testUID(0)}} {
				before := f.s.Calls()
				got, err := p.ListByTag(ctx, filter[0], filter[1])
				if err != nil || len(got) == 0 {
					t.Fatalf("ListByTag(%s): %+v, %v", filter[0], got, err)
				}
				n := f.s.Calls() - before
				t.Logf("%s: ListByTag(%s) over %d VMs: %d API calls", mode, filter[0], vms, n)
				want := 1
				if mode != "free" {
					want = 1 + 2*vms
				}
				if n != want {
					t.Errorf("%s: ListByTag(%s) made %d calls, want %d", mode, filter[0], n, want)
				}
			}
		})
	}
}
