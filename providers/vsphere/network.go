package vsphere

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/types"
	"go.yaml.in/yaml/v3"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/images/nocloud"
)

// A static address (contract §2.2, spec entries 5, 7 and 10) reaches the
// guest as the network key of guestinfo.metadata, which cloud-init's
// VMware datasource reads as network config version 1 or 2
// (cloudinit/sources/DataSourceVMware.py, process_metadata and
// network_config: a mapping under "network" is the config). The config
// matches the VM's network card by its MAC, which vCenter generates for
// the clone. So, as CAPV does (at 111a1ba9b,
// pkg/services/govmomi/vcenter/clone.go sets PowerOn false: "important to
// not power the VM on before its virtual hardware is created and the MAC
// address(es) used to build and inject the VM with cloud-init metadata are
// generated"; service.go runs reconcileMetadata, then
// reconcilePowerState), a VM with a static address is cloned powered off,
// its MAC read, its metadata rewritten with the network, and only then
// powered on: cloud-init applies the network of an instance's first boot.

// markAddress is the static address the VM was made for, written by the
// clone itself (as the other marks, not a guestinfo key): Get reports the
// VM Running only once VMware Tools report exactly it, so a guest that
// came up on DHCP is never taken for ready, by this provider or by one
// restarted since.
const markAddress = "egressproxies.address"

// metadata is guestinfo.metadata: the instance ID and host name, and with
// a static network the network config for the card whose MAC is mac.
func metadata(name string, n *contract.StaticNetwork, mac string) ([]byte, error) {
	meta := fmt.Appendf(nil, "instance-id: %s\nlocal-hostname: %s\n", name, name)
	if n == nil {
		return meta, nil
	}
	config, err := nocloud.NetworkConfig(*n, mac)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(config, &doc); err != nil {
		return nil, fmt.Errorf("network config: %w", err)
	}
	if len(doc.Content) != 1 {
		return nil, fmt.Errorf("network config: %d documents, want one", len(doc.Content))
	}
	network, err := yaml.Marshal(map[string]*yaml.Node{"network": doc.Content[0]})
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	return append(meta, network...), nil
}

// needsNetwork says Create must write the static network into the VM's
// metadata before it powers the VM on: the request has one, the VM was
// made for it (markAddress; a VM found with another is returned as it is,
// contract §2.2) and it has never run. Every power-on of a never-started
// VM is preceded by the write, so a clone whose power-on failed, or a
// Create cut off between its clone and its power-on, is written again:
// the same bytes.
func needsNetwork(vm vmRead, n *contract.StaticNetwork) bool {
	e := extra(vm.VirtualMachine)
	return n != nil && e[markAddress] == n.IP() && e[markStarted] != "true" &&
		vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn
}

// deliverNetwork writes the static network into the VM's
// guestinfo.metadata, matched to its first network card's MAC (the card
// the zone's network is set on, nicChange): one Reconfigure. The MAC
// comes from the read of the clone; a VM Create found again is read for
// its devices first.
func (p *Provider) deliverNetwork(ctx context.Context, vm vmRead, name string, n *contract.StaticNetwork) error {
	return p.do(ctx, "WriteNetwork", p.cfg.TaskTimeout.Duration, func(ctx context.Context, c *vim25.Client) error {
		obj := object.NewVirtualMachine(c, vm.Reference())
		devices := deviceList(vm)
		if devices == nil {
			var err error
			if devices, err = obj.Device(ctx); err != nil {
				return err
			}
		}
		mac, err := firstMAC(devices, name)
		if err != nil {
			return err
		}
		meta, err := metadata(name, n, mac)
		if err != nil {
			return err
		}
		task, err := obj.Reconfigure(ctx, types.VirtualMachineConfigSpec{ExtraConfig: metadataOptions(meta)})
		if err != nil {
			return err
		}
		if err := task.Wait(ctx); err != nil {
			return err
		}
		logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("wrote the static network", "address", n.Address.String(), "mac", mac)
		return nil
	})
}

// deviceList is the VM's devices as its read found them, nil when the read
// did not ask for them.
func deviceList(vm vmRead) object.VirtualDeviceList {
	if vm.Config == nil || len(vm.Config.Hardware.Device) == 0 {
		return nil
	}
	return object.VirtualDeviceList(vm.Config.Hardware.Device)
}

// firstMAC is the MAC of the first network card, the one the network is
// for. vCenter generates a clone's MACs when it makes the clone (API
// reference, VirtualEthernetCard.addressType "generated"); one without is
// not known yet: transient.
func firstMAC(devices object.VirtualDeviceList, name string) (string, error) {
	nics := devices.SelectByType((*types.VirtualEthernetCard)(nil))
	if len(nics) == 0 {
		return "", contract.Permanentf("VM %q has no network card for its static address: the template needs one", name)
	}
	mac := nics[0].(types.BaseVirtualEthernetCard).GetVirtualEthernetCard().MacAddress
	if mac == "" {
		return "", fmt.Errorf("the network card of VM %q has no MAC address yet", name)
	}
	return mac, nil
}

// staticState is the state of a powered-on VM made for the static address
// want: Running at it once VMware Tools report it among the guest's
// addresses, else Provisioning with a Message saying what is awaited and
// what the guest reports.
func staticState(g *types.GuestInfo, want string) (contract.State, string, string) {
	reported := guestIPs(g)
	// Exactly the address, in whatever form Tools report it (an
	// IPv4-mapped IPv6 address is the same address).
	if slices.ContainsFunc(reported, func(ip string) bool {
		a, err := netip.ParseAddr(ip)
		return err == nil && a.Unmap().String() == want
	}) {
		return contract.StateRunning, want, ""
	}
	got := "no address yet"
	if len(reported) > 0 {
		got = strings.Join(reported, ", ")
	}
	return contract.StateProvisioning, "", fmt.Sprintf("waiting for VMware Tools to report the static address %s; they report %s", want, got)
}
