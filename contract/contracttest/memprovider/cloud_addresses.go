package memprovider

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
)

// The Cloud's egress addresses, as a cloud's floating IPs work: allocated
// in a region with labels set in the same call, attached to one VM at a
// time (attaching to another VM moves it), detached when their VM is
// deleted, and kept until released.

// Address is one allocated egress address.
type Address struct {
	IP     string
	Labels map[string]string
	// VM is the name of the VM it is attached to, "" when detached.
	VM string
}

// addressPool is where the Cloud's egress addresses come from, numbered
// from its first host on (TEST-NET-3, RFC 5737: routable, and never
// anyone's).
var addressPool = netip.MustParsePrefix("203.0.113.0/24")

// AllocateAddress allocates a new address in the region with labels.
func (c *Cloud) AllocateAddress(ctx context.Context, token, regionName string, labels map[string]string) (Address, error) {
	var out Address
	err := c.inRegion(ctx, token, "allocateaddress", regionName, func(r *region) (err error) {
		out, err = r.allocate(regionName, labels)
		return err
	})
	return out, err
}

// allocate allocates the region's next address with labels; the caller
// holds c.mu.
func (r *region) allocate(regionName string, labels map[string]string) (Address, error) {
	ip := addressPool.Addr().Next() // the first host, then one per address handed out
	for range r.allocated {
		ip = ip.Next()
	}
	// Addresses are never reused; the pool's last address is its
	// broadcast, no host.
	if !addressPool.Contains(ip.Next()) {
		return Address{}, &APIError{409, "no_more_addresses", fmt.Sprintf("region %q has no free egress address", regionName)}
	}
	r.allocated++
	a := &Address{IP: ip.String(), Labels: maps.Clone(labels)}
	r.addresses[a.IP] = a
	return a.copy(), nil
}

// ListAddresses returns the region's addresses whose label key has value,
// oldest first: the pool hands addresses out in order, never twice.
func (c *Cloud) ListAddresses(ctx context.Context, token, regionName, key, value string) ([]Address, error) {
	var out []Address
	err := c.inRegion(ctx, token, "listaddresses", regionName, func(r *region) error {
		for _, a := range r.addresses {
			if a.Labels[key] == value {
				out = append(out, a.copy())
			}
		}
		slices.SortFunc(out, func(a, b Address) int { return netip.MustParseAddr(a.IP).Compare(netip.MustParseAddr(b.IP)) })
		return nil
	})
	return out, err
}

// AttachAddress attaches an address to a VM, detaching it from any other.
func (c *Cloud) AttachAddress(ctx context.Context, token, regionName, ip, vmName string) error {
	return c.inRegion(ctx, token, "attachaddress", regionName, func(r *region) error {
		a, ok := r.addresses[ip]
		if !ok {
			return &APIError{404, "address_not_found", fmt.Sprintf("address %s does not exist", ip)}
		}
		vm, ok := r.vms[vmName]
		if !ok {
			return &APIError{404, "vm_not_found", fmt.Sprintf("VM %q does not exist", vmName)}
		}
		if vm.Deleting {
			return &APIError{409, "vm_deleting", fmt.Sprintf("VM %q is being deleted", vmName)}
		}
		if old, ok := r.vms[a.VM]; ok {
			old.EgressIP = ""
		}
		a.VM, vm.EgressIP = vmName, ip
		return nil
	})
}

// ReleaseAddress releases an address, detaching it; a missing one is a 404.
func (c *Cloud) ReleaseAddress(ctx context.Context, token, regionName, ip string) error {
	return c.inRegion(ctx, token, "releaseaddress", regionName, func(r *region) error {
		a, ok := r.addresses[ip]
		if !ok {
			return &APIError{404, "address_not_found", fmt.Sprintf("address %s does not exist", ip)}
		}
		if vm, ok := r.vms[a.VM]; ok {
			vm.EgressIP = ""
		}
		delete(r.addresses, ip)
		return nil
	})
}

// detach detaches whatever address is attached to the VM, which its
// EgressIP names (AttachAddress and ReleaseAddress keep the two ends
// together); the caller holds c.mu.
func (r *region) detach(vmName string) {
	vm, ok := r.vms[vmName]
	if !ok {
		return
	}
	if a, ok := r.addresses[vm.EgressIP]; ok {
		a.VM = ""
	}
	vm.EgressIP = ""
}

func (a *Address) copy() Address {
	out := *a
	out.Labels = maps.Clone(a.Labels)
	return out
}
