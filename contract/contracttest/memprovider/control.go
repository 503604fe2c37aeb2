package memprovider

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

// Control is the harness's backend control over a Cloud: it implements
// every capability interface of contracttest, reaching into the Cloud the
// way a simulator's control API would, never through the provider.
type Control struct {
	Cloud *Cloud
}

var (
	_ contracttest.GuestReporter          = Control{}
	_ contracttest.StateInjector          = Control{}
	_ contracttest.PowerOffer             = Control{}
	_ contracttest.ListingHolder          = Control{}
	_ contracttest.UnstartedCreator       = Control{}
	_ contracttest.LegacyCreator          = Control{}
	_ contracttest.Locker                 = Control{}
	_ contracttest.DeleteStarter          = Control{}
	_ contracttest.UnmarkedCreator        = Control{}
	_ contracttest.UIDMarkedCreator       = Control{}
	_ contracttest.StrayEgressMaker       = Control{}
	_ contracttest.Holder                 = Control{}
	_ contracttest.FaultInjector          = Control{}
	_ contracttest.CredentialRejecter     = Control{}
	_ contracttest.CredentialRejecterFrom = Control{}
	_ contracttest.UserDataReader         = Control{}
	_ contracttest.CallCounter            = Control{}
	_ contracttest.Inventory              = Control{}
	_ contracttest.CallCutter             = Control{}
	_ contracttest.Resetter               = Control{}
)

// withVM runs fn on the VM a providerID names, under the Cloud's lock.
func (c Control) withVM(providerID string, fn func(*VM, *region)) error {
	regionName, name, err := ids.Parse(providerID)
	if err != nil {
		return err
	}
	c.Cloud.mu.Lock()
	defer c.Cloud.mu.Unlock()
	r, err := c.Cloud.region(regionName)
	if err != nil {
		return err
	}
	vm, ok := r.vms[name]
	if !ok {
		return fmt.Errorf("control: no VM %s", providerID)
	}
	fn(vm, r)
	return nil
}

// DeliveredNetwork reads the static network the guest is given (the
// zero StaticNetwork for DHCP).
func (c Control) DeliveredNetwork(_ context.Context, providerID string) (contract.StaticNetwork, error) {
	var out contract.StaticNetwork
	err := c.withVM(providerID, func(vm *VM, _ *region) {
		if vm.Network != nil {
			out = *vm.Network
			out.DNS = slices.Clone(vm.Network.DNS)
		}
	})
	return out, err
}

// ReportIP plays the guest reporting its address.
func (c Control) ReportIP(_ context.Context, providerID, ip string) error {
	return c.withVM(providerID, func(vm *VM, _ *region) { vm.IPs = []string{ip} })
}

// SetUnknownState puts the VM into a power state the state table lacks.
func (c Control) SetUnknownState(_ context.Context, providerID string) error {
	return c.withVM(providerID, func(vm *VM, _ *region) { vm.Power = "hibernating" })
}

// PowerOff powers the VM off, as a person would.
func (c Control) PowerOff(_ context.Context, providerID string) error {
	return c.withVM(providerID, func(vm *VM, _ *region) { vm.Power = "stopped" })
}

// CreateUnstarted defines the VM as the provider would, without starting it.
func (c Control) CreateUnstarted(ctx context.Context, req contract.CreateRequest) (string, error) {
	spec, err := c.spec(req)
	if err != nil {
		return "", err
	}
	vm, err := c.define(ctx, req, spec)
	if err != nil {
		return "", err
	}
	return ids.Format(vm.Region, vm.Name), nil
}

// CreateLegacy makes and starts the VM as a provider of contract v0.2 did:
// LabelManaged is contract.LegacyManagedValue, whatever req.Owner says (it
// may be empty). Tests use it to play an instance an older release of the
// operator made; the harness's LegacyCreator rules use it too.
func (c Control) CreateLegacy(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
	req.Owner = "legacy" // only to pass validation; the label is overwritten below
	spec, err := c.spec(req)
	if err != nil {
		return contract.Instance{}, err
	}
	spec.Labels[contract.LabelManaged] = contract.LegacyManagedValue
	vm, err := c.define(ctx, req, spec)
	if err != nil {
		return contract.Instance{}, err
	}
	if err := c.Cloud.StartVM(ctx, c.Cloud.token, vm.Region, vm.Name); err != nil {
		return contract.Instance{}, err
	}
	vm.Started, vm.Power = true, "running"
	return instance(vm), nil
}

// spec validates req and builds the VM the provider would, through a
// provider configured for req's placement alone.
func (c Control) spec(req contract.CreateRequest) (VMSpec, error) {
	p, err := New(Config{Token: c.Cloud.token, Regions: []string{req.Placement.Region},
		MachineTypes: map[string]MachineType{req.Placement.MachineType: {CPUs: 1, MemoryMiB: 512}},
		Images:       map[string]string{req.Placement.Image: c.Cloud.images[0]}}, c.Cloud)
	if err != nil {
		return VMSpec{}, err
	}
	return p.vmSpec(req)
}

// define uploads the seed volume and defines the VM, as Create's steps 2
// and 3 do.
func (c Control) define(ctx context.Context, req contract.CreateRequest, spec VMSpec) (VM, error) {
	if err := c.Cloud.CreateVolume(ctx, c.Cloud.token, req.Placement.Region, spec.SeedVolume, req.CloudInit); err != nil {
		return VM{}, err
	}
	return c.Cloud.CreateVM(ctx, c.Cloud.token, req.Placement.Region, spec)
}

// Lock holds the VM as a clone task would.
func (c Control) Lock(_ context.Context, providerID string) (func(), error) {
	err := c.withVM(providerID, func(vm *VM, _ *region) { vm.Lock = "clone" })
	return func() { _ = c.withVM(providerID, func(vm *VM, _ *region) { vm.Lock = "" }) }, err
}

// BeginDelete marks the VM deleting and holds it until finish.
func (c Control) BeginDelete(_ context.Context, providerID string) (func(), error) {
	var held *VM
	err := c.withVM(providerID, func(vm *VM, _ *region) { vm.Deleting, held = true, vm })
	return func() {
		if held != nil {
			c.Cloud.remove(held)
		}
	}, err
}

// CreateUnmarked makes a VM without labels, as a person would.
func (c Control) CreateUnmarked(ctx context.Context, name string, pl contract.Placement) (string, error) {
	vm, err := c.Cloud.CreateVM(ctx, c.Cloud.token, pl.Region, VMSpec{Name: name, Image: c.Cloud.images[0], CPUs: 1, MemoryMiB: 512})
	if err != nil {
		return "", err
	}
	return ids.Format(vm.Region, vm.Name), nil
}

// CreateUIDMarked makes a VM with the UID label valued uid and no managed
// label, as a copy of the operator's VM with that label taken off.
func (c Control) CreateUIDMarked(ctx context.Context, name string, pl contract.Placement, uid string) (string, error) {
	vm, err := c.Cloud.CreateVM(ctx, c.Cloud.token, pl.Region, VMSpec{Name: name, Image: c.Cloud.images[0], CPUs: 1, MemoryMiB: 512,
		Labels: map[string]string{contract.LabelUID: uid}})
	if err != nil {
		return "", err
	}
	return ids.Format(vm.Region, vm.Name), nil
}

// MakeStrayEgress allocates an address with the managed label valued
// owner and the UID label valued uid and no replica label, straight in
// the Cloud, as another tool's call would. A uid of "" is no UID label:
// the Cloud reads a missing label as "".
func (c Control) MakeStrayEgress(_ context.Context, regionName, owner, uid string) (string, func() error, error) {
	labels := map[string]string{contract.LabelManaged: owner, contract.LabelUID: uid}
	c.Cloud.mu.Lock()
	defer c.Cloud.mu.Unlock()
	r := c.Cloud.regions[regionName]
	if r == nil {
		return "", nil, fmt.Errorf("control: no region %q", regionName)
	}
	a, err := r.allocate(regionName, labels)
	if err != nil {
		return "", nil, err
	}
	return a.IP, func() error {
		c.Cloud.mu.Lock()
		defer c.Cloud.mu.Unlock()
		if _, ok := r.addresses[a.IP]; !ok {
			return contract.NotFound(fmt.Errorf("control: the stray address %s is gone: something released it", a.IP))
		}
		delete(r.addresses, a.IP)
		return nil
	}, nil
}

// DeleteUnmarked removes a VM CreateUnmarked or CreateUIDMarked made.
func (c Control) DeleteUnmarked(_ context.Context, providerID string) error {
	regionName, name, err := ids.Parse(providerID)
	if err != nil {
		return err
	}
	c.Cloud.mu.Lock()
	defer c.Cloud.mu.Unlock()
	vm := c.Cloud.regions[regionName].vms[name]
	switch {
	case vm == nil:
		return contract.NotFound(fmt.Errorf("control: no VM %s", providerID))
	case vm.Labels[contract.LabelManaged] != "":
		return fmt.Errorf("control: %s carries the operator's marks; not removing it", providerID)
	}
	delete(c.Cloud.regions[regionName].vms, name)
	return nil
}

// CutCall makes the n-th Cloud call from now answer 502, before or after
// it took effect.
func (c Control) CutCall(n int, after bool) error {
	c.Cloud.mu.Lock()
	defer c.Cloud.mu.Unlock()
	c.Cloud.cut = cut{call: c.Cloud.calls + n, after: after, answer: errCut}
	return nil
}

// FailCall makes the n-th Cloud call from now answer the Cloud's fault of
// class before it takes effect, in place of any cut.
func (c Control) FailCall(n int, class error) error {
	c.Cloud.mu.Lock()
	defer c.Cloud.mu.Unlock()
	c.Cloud.cut = cut{call: c.Cloud.calls + n, answer: faultFor(class)}
	return nil
}

// Reset drops queued faults and cuts, lets stalled calls go, accepts the
// token again, releases every lock and finishes every delete in progress.
func (c Control) Reset() {
	c.Cloud.gate.Stall()()
	c.Cloud.listGate.Stall()()
	c.Cloud.mu.Lock()
	defer c.Cloud.mu.Unlock()
	clear(c.Cloud.faults)
	clear(c.Cloud.afterOp)
	c.Cloud.cut = cut{}
	c.Cloud.rejecting, c.Cloud.rejectFrom = false, 0
	for _, r := range c.Cloud.regions {
		for name, vm := range r.vms {
			vm.Lock = ""
			if vm.Deleting {
				delete(r.vms, name)
			}
		}
	}
}

// Stall makes every Cloud call hang until release.
func (c Control) Stall() func() { return c.Cloud.gate.Stall() }

// HoldListings holds every ListVMs after its snapshot until release.
func (c Control) HoldListings() func() { return c.Cloud.listGate.Stall() }

// HeldListings is how many ListVMs calls wait now.
func (c Control) HeldListings() int { return c.Cloud.listGate.Held() }

// Listings counts the ListVMs calls begun.
func (c Control) Listings() int {
	c.Cloud.mu.Lock()
	defer c.Cloud.mu.Unlock()
	return c.Cloud.listings
}

// Held is how many Cloud calls the stall holds now.
func (c Control) Held() int { return c.Cloud.gate.Held() }

// opCalls says which Cloud call serves each provider operation.
var opCalls = map[contracttest.Op]string{
	contracttest.OpCreate: "createvm",
	contracttest.OpGet:    "getvm",
	contracttest.OpDelete: "deletevm",
	contracttest.OpList:   "listvms",
}

// faultFor is the Cloud's own error for each class.
func faultFor(class error) *APIError {
	switch {
	case errors.Is(class, contract.ErrNotFound):
		return &APIError{404, "vm_not_found", "the VM does not exist"}
	case errors.Is(class, contract.ErrQuota):
		return &APIError{403, "quota_exceeded", "Quota exceeded for cores: requested 2, limit 20, in use 20"}
	case errors.Is(class, contract.ErrPermanent):
		return &APIError{403, "forbidden", "the token lacks the vm.create privilege"}
	default:
		return &APIError{503, "unavailable", "the service is temporarily unavailable"}
	}
}

// FailNext queues a fault of class for the Cloud call serving op.
func (c Control) FailNext(op contracttest.Op, class error) error {
	call, ok := opCalls[op]
	if !ok {
		return fmt.Errorf("control: unknown op %q", op)
	}
	c.Cloud.mu.Lock()
	defer c.Cloud.mu.Unlock()
	c.Cloud.faults[call] = append(c.Cloud.faults[call], faultFor(class))
	return nil
}

// FailAfterCreate makes the next CreateVM define the VM, then answer 502.
func (c Control) FailAfterCreate() error {
	c.Cloud.mu.Lock()
	defer c.Cloud.mu.Unlock()
	c.Cloud.afterOp["createvm"] = &APIError{502, "bad_gateway", "the connection to the compute service was reset"}
	return nil
}

// RejectCredentials makes the Cloud refuse every token, or accept it again.
func (c Control) RejectCredentials(reject bool) {
	c.Cloud.mu.Lock()
	defer c.Cloud.mu.Unlock()
	c.Cloud.rejecting, c.Cloud.rejectFrom = reject, 0
}

// RejectCredentialsFrom makes the Cloud refuse every token from the n-th
// call from now on (1, or less, is the next), until
// RejectCredentials(false) or Reset.
func (c Control) RejectCredentialsFrom(n int) error {
	c.Cloud.mu.Lock()
	defer c.Cloud.mu.Unlock()
	c.Cloud.rejectFrom = c.Cloud.calls + n
	return nil
}

// UserData returns the seed volume the guest reads its user-data from;
// a VM without one reads none, as a guest with no seed finds nothing.
func (c Control) UserData(_ context.Context, providerID string) ([]byte, error) {
	var data []byte
	err := c.withVM(providerID, func(vm *VM, r *region) { data = r.volumes[vm.SeedVolume] })
	return slices.Clone(data), err
}

// Calls counts Cloud calls so far.
func (c Control) Calls() int {
	c.Cloud.mu.Lock()
	defer c.Cloud.mu.Unlock()
	return c.Cloud.calls
}

// Resources lists every VM, volume and egress address in the Cloud.
func (c Control) Resources(context.Context) ([]string, error) {
	c.Cloud.mu.Lock()
	defer c.Cloud.mu.Unlock()
	var out []string
	for _, rn := range slices.Sorted(maps.Keys(c.Cloud.regions)) {
		r := c.Cloud.regions[rn]
		for name := range r.vms {
			out = append(out, "vm "+rn+"/"+name)
		}
		for name := range r.volumes {
			out = append(out, "volume "+rn+"/"+name)
		}
		for ip := range r.addresses {
			out = append(out, "egress address "+rn+"/"+ip)
		}
	}
	return out, nil
}
