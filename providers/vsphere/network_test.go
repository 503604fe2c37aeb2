package vsphere

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Static addresses (contract §2.2, spec entries 5, 7 and 10): the network
// reaches the guest in guestinfo.metadata before its first boot, and Get
// reports Running only with exactly that address from VMware Tools.

// staticNetwork is an address of TEST-NET-2 with its gateway and two
// resolvers; vcsim gives it to no one, the control reports it.
func staticNetwork(host byte) *contract.StaticNetwork {
	return &contract.StaticNetwork{
		Address: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, 100, host}), 24),
		Gateway: netip.MustParseAddr("198.51.100.1"),
		DNS:     []netip.Addr{netip.MustParseAddr("198.51.100.53"), netip.MustParseAddr("198.51.100.54")},
	}
}

func staticRequest(name string) contract.CreateRequest {
	req := placementRequest(name)
	req.Network = staticNetwork(20)
	return req
}

// firstBoots records, for each VM powered on through the front, the
// network its guest read at that first boot: what guestinfo.metadata
// held once the power-on (a PowerOnVM_Task, or a clone with powerOn)
// had ended. cloud-init applies the network of its first boot; a network
// written later is never read (it runs per instance).
type firstBoots struct {
	v   *vcsim
	mu  sync.Mutex
	got map[string]bootNetwork // VM name -> its first boot's network
}

type bootNetwork struct {
	network contract.StaticNetwork
	err     error
}

var (
	thisVM    = regexp.MustCompile(`<_this type="VirtualMachine">([^<]+)</_this>`)
	powerOnVM = []byte("PowerOnVM_Task")
)

func (b *firstBoots) watch(v *vcsim) (stop func()) {
	b.v, b.got = v, map[string]bootNetwork{}
	var tap tapFunc = func(r *http.Request, call, answer []byte) {
		var ref types.ManagedObjectReference
		switch {
		case bytes.Contains(call, powerOnVM):
			m := thisVM.FindSubmatch(call)
			if m == nil {
				return
			}
			ref = types.ManagedObjectReference{Type: "VirtualMachine", Value: string(m[1])}
			v.awaitTask(r.Context(), answer)
		case bytes.Contains(call, []byte("CloneVM_Task")) && bytes.Contains(call, powerOnTrue):
			v.awaitTask(r.Context(), answer)
			m := taskRef.FindSubmatch(answer)
			if m == nil {
				return
			}
			var task mo.Task
			tref := types.ManagedObjectReference{Type: "Task", Value: string(m[1])}
			if err := object.NewCommon(v.client, tref).Properties(r.Context(), tref, []string{"info"}, &task); err != nil {
				return
			}
			res, ok := task.Info.Result.(types.ManagedObjectReference)
			if !ok {
				return
			}
			ref = res
		default:
			return
		}
		ctx := context.WithoutCancel(r.Context())
		vm := object.NewVirtualMachine(v.client, ref)
		name, err := vm.ObjectName(ctx)
		if err != nil {
			return
		}
		n, err := (control{v}).networkOf(ctx, vm)
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, seen := b.got[name]; !seen {
			b.got[name] = bootNetwork{n, err}
		}
	}
	v.tap.Store(&tap)
	return func() { v.tap.Store(nil) }
}

// check fails t unless the VM named name was powered on with want.
func (b *firstBoots) check(t *testing.T, name string, want contract.StaticNetwork, what string) {
	t.Helper()
	b.mu.Lock()
	got, ok := b.got[name]
	b.mu.Unlock()
	switch {
	case !ok:
		t.Errorf("%s: %s was never powered on", what, name)
	case got.err != nil:
		t.Errorf("%s: when %s was first powered on, its guest could read no static network: %v", what, name, got.err)
	case !reflect.DeepEqual(got.network, want):
		t.Errorf("%s: when %s was first powered on, its guest read %+v, want %+v", what, name, got.network, want)
	}
}

// The network is in guestinfo.metadata, matched to the VM's network card
// by its MAC, before the VM is first powered on, and stays there.
func TestStaticNetworkReachesTheFirstBoot(t *testing.T) {
	v := startVcsim(t)
	var boots firstBoots
	defer boots.watch(v)()
	req := staticRequest("static")
	inst, err := v.provider(t).Create(context.Background(), req)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	boots.check(t, req.Name, *req.Network, "Create")
	got, err := (control{v}).DeliveredNetwork(context.Background(), inst.ProviderID)
	if err != nil || !reflect.DeepEqual(got, *req.Network) {
		t.Errorf("DeliveredNetwork after Create = %+v, %v; want %+v", got, err, *req.Network)
	}
}

// Get reports the static address and nothing else: while VMware Tools
// report another address (the guest came up on DHCP: a template without
// the VMware datasource, a network it could not apply), the VM is
// Provisioning with a Message naming both; once they report the static
// address, Running with it. A restarted provider knows the address from
// the VM's mark.
func TestGetReportsOnlyTheStaticAddress(t *testing.T) {
	v := startVcsim(t)
	ctx := context.Background()
	req := staticRequest("awaits")
	inst, err := v.provider(t).Create(ctx, req)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	const dhcp = "203.0.113.7"
	if err := (control{v}).ReportIP(ctx, inst.ProviderID, dhcp); err != nil {
		t.Fatal(err)
	}
	fresh := v.provider(t)
	got, err := fresh.Get(ctx, inst.ProviderID)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.State != contract.StateProvisioning || got.IP != "" {
		t.Errorf("Get while Tools report %s = %s %q, want Provisioning without an IP: the static address is %s", dhcp, got.State, got.IP, req.Network.IP())
	}
	if !strings.Contains(got.Message, req.Network.IP()) || !strings.Contains(got.Message, dhcp) {
		t.Errorf("Get's Message = %q, want it to name the awaited %s and the reported %s", got.Message, req.Network.IP(), dhcp)
	}
	listed, err := fresh.ListByTag(ctx, contract.LabelUID, req.UID)
	if err != nil || len(listed) != 1 || listed[0].State != contract.StateProvisioning || listed[0].IP != "" {
		t.Errorf("ListByTag while Tools report %s = %+v, %v; want the VM, Provisioning without an IP", dhcp, listed, err)
	}
	if err := (control{v}).ReportIP(ctx, inst.ProviderID, req.Network.IP()); err != nil {
		t.Fatal(err)
	}
	got, err = fresh.Get(ctx, inst.ProviderID)
	if err != nil || got.State != contract.StateRunning || got.IP != req.Network.IP() || got.Message != "" {
		t.Errorf("Get once Tools report %s = %s %q %q, %v; want Running at it, no Message", req.Network.IP(), got.State, got.IP, got.Message, err)
	}
}

// A Create with a static network cut off at any of its calls, before
// vCenter saw the call or after it did the work, is resumed by the next
// Create of a restarted provider into one VM whose first boot read the
// network: no attempt powers on a VM before its network is written.
func TestStaticNetworkCreateResumes(t *testing.T) {
	v := startVcsim(t)
	ctx := context.Background()
	var boots firstBoots
	defer boots.watch(v)()
	// One provider with its session and cache, as in a running operator,
	// makes the Creates that are cut; a restarted one resumes them.
	p := v.provider(t)
	steps := 0
	for _, name := range []string{"static-warm", "static-count"} {
		before := v.calls.Load()
		inst, err := p.Create(ctx, staticRequest(name))
		if err != nil {
			t.Fatalf("Create %s: %v", name, err)
		}
		steps = int(v.calls.Load() - before)
		if err := p.Delete(ctx, inst.ProviderID); err != nil {
			t.Fatal(err)
		}
	}
	failed := 0
	for n := 1; n <= steps; n++ {
		for _, after := range []bool{false, true} {
			req := staticRequest(fmt.Sprintf("static-cut-%d-%v", n, after))
			req.UID = "uid-" + req.Name
			if err := (control{v}).CutCall(n, after); err != nil {
				t.Fatal(err)
			}
			if _, err := p.Create(ctx, req); err != nil {
				failed++
			}
			(control{v}).Reset()
			what := fmt.Sprintf("call %d of %d cut (after: %v)", n, steps, after)
			inst, err := v.provider(t).Create(ctx, req)
			if err != nil {
				t.Fatalf("%s: the next Create: %v", what, err)
			}
			boots.check(t, req.Name, *req.Network, what)
			if got, err := (control{v}).DeliveredNetwork(ctx, inst.ProviderID); err != nil || !reflect.DeepEqual(got, *req.Network) {
				t.Errorf("%s: DeliveredNetwork = %+v, %v; want %+v", what, got, err, *req.Network)
			}
			if found, err := p.ListByTag(ctx, contract.LabelUID, req.UID); err != nil || len(found) != 1 {
				t.Errorf("%s: ListByTag = %+v, %v; want the one VM", what, found, err)
			}
			// Each VM goes once checked: the folder stays small.
			if err := p.Delete(ctx, inst.ProviderID); err != nil {
				t.Fatalf("%s: Delete: %v", what, err)
			}
		}
	}
	t.Logf("a warm Create with a static network makes %d SOAP calls", steps)
	if failed == 0 {
		t.Fatalf("no cut of the %d calls made a Create fail: the cuts reached none of its calls", steps)
	}
}

// A static address needs a network card to go to: a template without one
// fails the Create as Permanent, naming the template, before any clone,
// whether or not the zone names a network (without one, the template's
// cards are not read otherwise).
func TestStaticNetworkNeedsANetworkCard(t *testing.T) {
	v := startVcsim(t)
	ctx := context.Background()
	// vCenter reconfigures no template (vcsim: NotSupported): the card is
	// removed from it as a VM, as an administrator would.
	f := find.NewFinder(v.client, true)
	tmpl, err := f.VirtualMachine(ctx, "/DC0/vm/"+templateName)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := f.ResourcePool(ctx, v.cfg.Regions["dc0"].Zones["c0"].ResourcePool)
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := f.HostSystemList(ctx, "/DC0/host/DC0_C0/*")
	if err != nil {
		t.Fatal(err)
	}
	if err := tmpl.MarkAsVirtualMachine(ctx, *pool, hosts[0]); err != nil {
		t.Fatal(err)
	}
	devices, err := tmpl.Device(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tmpl.RemoveDevice(ctx, false, devices.SelectByType((*types.VirtualEthernetCard)(nil))...); err != nil {
		t.Fatalf("remove the template's network cards: %v", err)
	}
	if err := tmpl.MarkAsTemplate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, zoneNetwork := range []string{"DC0_DVPG0", ""} {
		cfg := v.cfg
		cfg.Regions = maps.Clone(cfg.Regions)
		region := cfg.Regions["dc0"]
		region.Zones = map[string]Zone{"c0": region.Zones["c0"]}
		zone := region.Zones["c0"]
		zone.Network = zoneNetwork
		region.Zones["c0"] = zone
		cfg.Regions["dc0"] = region
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		req := staticRequest("no-card")
		before := v.clonesAsked()
		_, err = p.Create(ctx, req)
		if !errors.Is(err, contract.ErrPermanent) || !strings.Contains(err.Error(), templateName) {
			t.Errorf("zone network %q: Create from a template without a network card = %v, want ErrPermanent naming %s", zoneNetwork, err, templateName)
		}
		if n := v.clonesAsked() - before; n != 0 {
			t.Errorf("zone network %q: %d clones asked, want none", zoneNetwork, n)
		}
	}
}

// clonesAsked is how many clones were asked of the templates.
func (v *vcsim) clonesAsked() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.clones)
}
