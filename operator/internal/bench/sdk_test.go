package bench

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/devsim"
)

// bareSDK is the baseline: what a script on govmomi alone does to make and
// remove the VMs the operator makes, through the same front.
type bareSDK struct {
	c              *vim25.Client
	tmpl           *object.VirtualMachine
	dir            *object.Folder
	poolRef, dsRef types.ManagedObjectReference
}

// loginSDK logs in and finds the inventory the operator's config names.
func loginSDK(b *testing.B) *bareSDK {
	b.Helper()
	ctx := context.Background()
	u, _ := url.Parse(front.URL + "/sdk")
	c, err := vim25.NewClient(ctx, soap.NewClient(u, true))
	if err != nil {
		b.Fatal(err)
	}
	if err := session.NewManager(c).Login(ctx, url.UserPassword(user, password)); err != nil {
		b.Fatal(err)
	}
	f := find.NewFinder(c, true)
	dc, err := f.Datacenter(ctx, "DC0")
	if err != nil {
		b.Fatal(err)
	}
	f.SetDatacenter(dc)
	s := &bareSDK{c: c}
	if s.tmpl, err = f.VirtualMachine(ctx, "/DC0/vm/"+devsim.Template); err != nil {
		b.Fatal(err)
	}
	if s.dir, err = f.Folder(ctx, devsim.Folder); err != nil {
		b.Fatal(err)
	}
	pool, err := f.ResourcePool(ctx, devsim.ResourcePool)
	if err != nil {
		b.Fatal(err)
	}
	ds, err := f.Datastore(ctx, devsim.Datastore)
	if err != nil {
		b.Fatal(err)
	}
	s.poolRef, s.dsRef = pool.Reference(), ds.Reference()
	return s
}

// create clones, powers on and waits for the guest's address of n VMs,
// `workers` at a time, and returns the time it took and the VMs.
func (s *bareSDK) create(b *testing.B, n, workers int) (time.Duration, []*object.VirtualMachine) {
	b.Helper()
	ctx := context.Background()
	prefix := fmt.Sprintf("sdk-%d", time.Now().UnixNano()%1e9)
	start := time.Now()
	names := make(chan string, n)
	for i := range n {
		names <- fmt.Sprintf("%s-%d", prefix, i)
	}
	close(names)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var vms []*object.VirtualMachine
	for range workers {
		wg.Go(func() {
			for name := range names {
				task, err := s.tmpl.Clone(ctx, s.dir, name, types.VirtualMachineCloneSpec{
					Location: types.VirtualMachineRelocateSpec{Pool: &s.poolRef, Datastore: &s.dsRef},
					Config:   &types.VirtualMachineConfigSpec{NumCPUs: 1, MemoryMB: 1024},
				})
				if err != nil {
					b.Error(err)
					return
				}
				info, err := task.WaitForResult(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				vm := object.NewVirtualMachine(s.c, info.Result.(types.ManagedObjectReference))
				mu.Lock()
				vms = append(vms, vm)
				mu.Unlock()
				if task, err = vm.PowerOn(ctx); err != nil || task.Wait(ctx) != nil {
					b.Errorf("power on %s: %v", name, err)
					return
				}
				for {
					var props mo.VirtualMachine
					if err := vm.Properties(ctx, vm.Reference(), []string{"guest.ipAddress"}, &props); err != nil {
						b.Error(err)
						return
					}
					if props.Guest != nil && props.Guest.IpAddress != "" {
						break
					}
					time.Sleep(poll)
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), vms
}

// destroy powers off and destroys the VMs, `workers` at a time, waiting
// for each task as govmomi does, and returns the time it took.
func (s *bareSDK) destroy(b *testing.B, vms []*object.VirtualMachine, workers int) time.Duration {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	todo := make(chan *object.VirtualMachine, len(vms))
	for _, vm := range vms {
		todo <- vm
	}
	close(todo)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for vm := range todo {
				task, err := vm.PowerOff(ctx)
				if err == nil {
					err = task.Wait(ctx)
				}
				if err != nil {
					b.Errorf("power off %s: %v", vm.Reference(), err)
					continue
				}
				if task, err = vm.Destroy(ctx); err == nil {
					err = task.Wait(ctx)
				}
				if err != nil {
					b.Errorf("destroy %s: %v", vm.Reference(), err)
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}
