// Package devsim is the simulated world of the local dev job and the
// benchmarks: a vCenter (vcsim) with a template and a folder for the
// operator, a player for the guests' VMware Tools, and a stand-in for the
// proxies' ports. None of it is used by the operator itself.
package devsim

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"sync/atomic"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// The simulated inventory the providers configs of the dev job and the
// benchmarks name.
const (
	Datacenter   = "DC0"
	Folder       = "/DC0/vm/egress-proxies"
	Template     = "DC0_C0_RP0_VM0"
	ResourcePool = "/DC0/host/DC0_C0/Resources"
	Datastore    = "LocalDS_0"
	Network      = "DC0_DVPG0"
)

// Vcsim is a running simulated vCenter.
type Vcsim struct {
	Model  *simulator.Model
	Server *simulator.Server
	// Client is a session of the harness's own, straight to the simulator.
	Client *vim25.Client
	ips    atomic.Int32
}

// StartVcsim starts a vCenter simulator on loopback that accepts user and
// password, with Template powered off and marked as a template and Folder
// created. withTLS serves https with a self-signed certificate.
func StartVcsim(ctx context.Context, user, password string, withTLS bool) (*Vcsim, error) {
	model := simulator.VPX()
	if err := model.Create(); err != nil {
		return nil, err
	}
	lockSearchIndex(model)
	if withTLS {
		model.Service.TLS = new(tls.Config)
	}
	model.Service.Listen = &url.URL{Host: "127.0.0.1:0", User: url.UserPassword(user, password)}
	s := &Vcsim{Model: model, Server: model.Service.NewServer()}
	if err := s.prepare(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Vcsim) prepare(ctx context.Context) error {
	c, err := vim25.NewClient(ctx, soap.NewClient(s.Server.URL, true))
	if err != nil {
		return err
	}
	if err := session.NewManager(c).Login(ctx, s.Server.URL.User); err != nil {
		return err
	}
	s.Client = c
	f := find.NewFinder(c, true)
	vm, err := f.VirtualMachine(ctx, path.Join("/", Datacenter, "vm", Template))
	if err != nil {
		return err
	}
	task, err := vm.PowerOff(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		return fmt.Errorf("power off the template: %w", err)
	}
	if err := vm.MarkAsTemplate(ctx); err != nil {
		return err
	}
	dc, err := f.Datacenter(ctx, Datacenter)
	if err != nil {
		return err
	}
	folders, err := dc.Folders(ctx)
	if err != nil {
		return err
	}
	_, err = folders.VmFolder.CreateFolder(ctx, path.Base(Folder))
	return err
}

// Stop stops the simulator.
func (s *Vcsim) Stop() {
	s.Server.Close()
	s.Model.Remove()
}

// PlayGuests plays VMware Tools until ctx ends: every powered-on VM of
// Folder without an address gets one within every: the static address it
// was made for (its MarkAddress), or one from 192.0.2.0/24 and up (documentation
// ranges: reported, never contacted), through vcsim's SET.guest.ipAddress.
// reported, if set, hears of each.
func (s *Vcsim) PlayGuests(ctx context.Context, every time.Duration, reported func(vm, ip string)) {
	s.PlayGuestsAt(ctx, every, nil, reported)
}

// PlayGuestsAt is PlayGuests where addressOf, if set, names the address a
// VM's guest reports: the static address it was given, as a guest that
// applied its network config would. "" takes the next address as
// PlayGuests does; a VM whose address is not known yet is asked again.
func (s *Vcsim) PlayGuestsAt(ctx context.Context, every time.Duration, addressOf func(vm string) (ip string, known bool), reported func(vm, ip string)) {
	for ctx.Err() == nil {
		time.Sleep(every)
		dir, err := find.NewFinder(s.Client, true).Folder(ctx, Folder)
		if err != nil {
			continue
		}
		v, err := view.NewManager(s.Client).CreateContainerView(ctx, dir.Reference(), []string{"VirtualMachine"}, true)
		if err != nil {
			continue
		}
		var vms []mo.VirtualMachine
		_ = v.Retrieve(ctx, []string{"VirtualMachine"}, []string{"name", "runtime.powerState", "guest.ipAddress"}, &vms)
		_ = v.Destroy(ctx)
		for _, vm := range vms {
			if vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn || (vm.Guest != nil && vm.Guest.IpAddress != "") {
				continue
			}
			ip, known := s.madeFor(ctx, vm.Reference()), true
			if addressOf != nil {
				ip, known = addressOf(vm.Name)
			}
			if !known {
				continue
			}
			if ip == "" {
				n := s.ips.Add(1) - 1
				ip = fmt.Sprintf("192.0.%d.%d", 2+n/250, 10+n%240)
			}
			task, err := object.NewVirtualMachine(s.Client, vm.Reference()).Reconfigure(ctx, types.VirtualMachineConfigSpec{
				ExtraConfig: []types.BaseOptionValue{&types.OptionValue{Key: "SET.guest.ipAddress", Value: ip}},
			})
			if err == nil && task.Wait(ctx) == nil && reported != nil {
				reported(vm.Name, ip)
			}
		}
	}
}

// MarkAddress is the vSphere provider's mark of the static address a VM
// was made for (providers/vsphere network.go): the address a guest that
// applied its guestinfo.metadata network reports.
const MarkAddress = "egressproxies.address"

// madeFor is the static address the VM was made for, "" for none.
func (s *Vcsim) madeFor(ctx context.Context, ref types.ManagedObjectReference) string {
	var vm mo.VirtualMachine
	if err := property.DefaultCollector(s.Client).RetrieveOne(ctx, ref, []string{"config.extraConfig"}, &vm); err != nil || vm.Config == nil {
		return ""
	}
	return ExtraConfig(vm.Config.ExtraConfig)[MarkAddress]
}

// ExtraConfig reads a VM's extraConfig as a map.
func ExtraConfig(options []types.BaseOptionValue) map[string]string {
	out := map[string]string{}
	for _, o := range options {
		if v := o.GetOptionValue(); v != nil {
			out[v.Key], _ = v.Value.(string)
		}
	}
	return out
}

// StandInProxy listens on loopback and answers every request with an HTTP
// status line, as a proxy answers a non-proxy request; the operator's
// probe is pointed at it. It stops with ctx or Close.
func StandInProxy(ctx context.Context) (net.Listener, error) {
	return StandInProxyAt(ctx, "127.0.0.1:0")
}

// StandInProxyAt is StandInProxy listening on addr.
func StandInProxyAt(ctx context.Context, addr string) (net.Listener, error) {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			conn, err := l.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			go func() {
				defer func() { _ = conn.Close() }()
				_, _ = bufio.NewReader(conn).ReadString('\n')
				_, _ = conn.Write([]byte("HTTP/1.0 400 Bad Request\r\n\r\n"))
			}()
		}
	}()
	return l, nil
}

// Dialer returns a dial function that reaches l whatever address it is
// given: the probe runs for real, over loopback only.
func Dialer(l net.Listener) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, l.Addr().String())
	}
}
