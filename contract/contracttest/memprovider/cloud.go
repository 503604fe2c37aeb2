package memprovider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

// Cloud is an in-memory IaaS backend with the habits of a real one: regions,
// VMs whose names are unique per region, labels filtered on the server,
// volumes that outlive a VM unless deleted, a token on every call, locks,
// asynchronous deletion, and errors that carry an HTTP-like status and a
// code. It is the backend the reference provider talks to; the harness
// drives it through Control.
type Cloud struct {
	mu      sync.Mutex
	token   string
	regions map[string]*region
	images  []string
	// latency is how long every call takes on the wire, as a remote API's
	// round trip does; concurrent calls overlap in it.
	latency time.Duration
	// DeleteDelay is how long a deleted VM stays in state "deleting" before
	// it is gone; zero removes it at once.
	deleteDelay time.Duration

	calls     int
	gate      contracttest.Gate
	listings  int               // ListVMs calls begun
	listGate  contracttest.Gate // holds a listing after its snapshot (HoldListings)
	faults    map[string][]*APIError
	afterOp   map[string]*APIError // fail after the op took effect
	cut       cut                  // one call to cut, counted by calls
	rejecting bool
	// rejectFrom is the call, counted by calls, from which every token is
	// refused (RejectCredentialsFrom); zero refuses none.
	rejectFrom int
}

// cut names one call by its number in calls, whether it fails before or
// after taking effect, and its answer: errCut (CutCall) or a fault of a
// class (FailCall). Zero cuts nothing.
type cut struct {
	call   int
	after  bool
	answer *APIError
}

// errCut is what a cut call answers: the connection dropped.
var errCut = &APIError{502, "bad_gateway", "the connection to the compute service was reset"}

type region struct {
	vms     map[string]*VM
	volumes map[string][]byte
	// addresses are the region's allocated egress addresses, by IP.
	addresses map[string]*Address
	// allocated counts the addresses ever allocated, so none is reused.
	allocated int
}

// VM is one virtual machine as the Cloud stores it.
type VM struct {
	Region     string
	Name       string
	Power      string // building, defined, running, stopped, paused, or anything else
	Lock       string // a task holding the VM ("clone", "backup"), empty when free
	Started    bool   // has run at least once
	Deleting   bool
	Labels     map[string]string
	SeedVolume string
	IPs        []string
	// EgressIP is the egress address attached to the VM, "" for none.
	EgressIP string
	// Network is the static network the guest is given (its network
	// config), nil for DHCP.
	Network     *contract.StaticNetwork
	MachineType string
	Image       string
	CPUs        int
	MemoryMiB   int
	Created     time.Time
}

// VMSpec is what CreateVM takes.
type VMSpec struct {
	Name        string
	Labels      map[string]string
	SeedVolume  string
	MachineType string
	Image       string
	CPUs        int
	MemoryMiB   int
	// Network, when set, is given to the guest as its static network.
	Network *contract.StaticNetwork
}

// APIError is the Cloud's error: an HTTP-like status, a machine code and a
// message, as a REST API's error body carries them.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("memcloud: %d %s: %s", e.Status, e.Code, e.Message)
}

// SetLatency makes every call take d on the wire, so that concurrent
// callers overlap as they do against a remote API.
func (c *Cloud) SetLatency(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.latency = d
}

// NewCloud returns a Cloud with the given regions, images and API token.
func NewCloud(token string, regions, images []string, deleteDelay time.Duration) *Cloud {
	c := &Cloud{
		token: token, regions: map[string]*region{}, images: images, deleteDelay: deleteDelay,
		faults: map[string][]*APIError{}, afterOp: map[string]*APIError{},
	}
	for _, r := range regions {
		c.regions[r] = &region{vms: map[string]*VM{}, volumes: map[string][]byte{}, addresses: map[string]*Address{}}
	}
	return c
}

// call runs one API call: it counts it, honours a stall and ctx, checks
// the token, returns any fault injected for op, and runs fn under c.mu; a
// call cut after it took effect runs fn and answers the cut's answer.
func (c *Cloud) call(ctx context.Context, token, op string, fn func() error) error {
	c.mu.Lock()
	c.calls++
	n, latency := c.calls, c.latency
	c.mu.Unlock()
	if err := c.gate.Pass(ctx); err != nil {
		return err
	}
	select {
	case <-time.After(latency):
	case <-ctx.Done():
		return ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cutHere, this := c.cut.call == n, c.cut
	if cutHere {
		c.cut = cut{}
	}
	switch {
	case cutHere && !this.after:
		return this.answer
	case c.rejecting || c.rejectFrom > 0 && n >= c.rejectFrom || token != c.token:
		return &APIError{401, "unauthorized", "the API token is invalid or expired"}
	}
	if queue := c.faults[op]; len(queue) > 0 {
		c.faults[op] = queue[1:]
		return queue[0]
	}
	if err := fn(); err != nil || !cutHere {
		return err
	}
	return this.answer
}

// region returns a region; the caller holds c.mu.
func (c *Cloud) region(name string) (*region, error) {
	r, ok := c.regions[name]
	if !ok {
		return nil, &APIError{404, "region_not_found", fmt.Sprintf("region %q does not exist", name)}
	}
	return r, nil
}

// WhoAmI checks the token.
func (c *Cloud) WhoAmI(ctx context.Context, token string) error {
	return c.call(ctx, token, "whoami", func() error { return nil })
}

// GetRegion checks that a region exists.
func (c *Cloud) GetRegion(ctx context.Context, token, regionName string) error {
	return c.inRegion(ctx, token, "getregion", regionName, func(*region) error { return nil })
}

// GetImage checks that an image exists.
func (c *Cloud) GetImage(ctx context.Context, token, image string) error {
	return c.call(ctx, token, "getimage", func() error {
		if !slices.Contains(c.images, image) {
			return &APIError{404, "image_not_found", fmt.Sprintf("image %q does not exist", image)}
		}
		return nil
	})
}

// inRegion runs one API call that works on a region, under c.mu.
func (c *Cloud) inRegion(ctx context.Context, token, op, regionName string, fn func(*region) error) error {
	return c.call(ctx, token, op, func() error {
		r, err := c.region(regionName)
		if err != nil {
			return err
		}
		return fn(r)
	})
}

// onVM runs one API call that works on an existing VM, under c.mu.
func (c *Cloud) onVM(ctx context.Context, token, op, regionName, name string, fn func(*VM) error) error {
	return c.inRegion(ctx, token, op, regionName, func(r *region) error {
		vm, ok := r.vms[name]
		if !ok {
			return &APIError{404, "vm_not_found", fmt.Sprintf("VM %q does not exist", name)}
		}
		return fn(vm)
	})
}

// MaxVolumeBytes is the largest volume the Cloud stores.
const MaxVolumeBytes = 64 << 10

// CreateVolume stores data as a volume; an existing volume of that name is
// a 409, one over MaxVolumeBytes a 413.
func (c *Cloud) CreateVolume(ctx context.Context, token, regionName, name string, data []byte) error {
	return c.inRegion(ctx, token, "createvolume", regionName, func(r *region) error {
		if len(data) > MaxVolumeBytes {
			return &APIError{413, "too_large", fmt.Sprintf("volume %q: %d bytes, at most %d", name, len(data), MaxVolumeBytes)}
		}
		if _, ok := r.volumes[name]; ok {
			return &APIError{409, "volume_exists", fmt.Sprintf("volume %q already exists", name)}
		}
		r.volumes[name] = slices.Clone(data)
		return nil
	})
}

// DeleteVolume removes a volume; a missing one is a 404.
func (c *Cloud) DeleteVolume(ctx context.Context, token, regionName, name string) error {
	return c.inRegion(ctx, token, "deletevolume", regionName, func(r *region) error {
		if _, ok := r.volumes[name]; !ok {
			return &APIError{404, "volume_not_found", fmt.Sprintf("volume %q does not exist", name)}
		}
		delete(r.volumes, name)
		return nil
	})
}

// CreateVM defines a VM in state "defined"; a taken name is a 409.
func (c *Cloud) CreateVM(ctx context.Context, token, regionName string, spec VMSpec) (VM, error) {
	var out VM
	err := c.inRegion(ctx, token, "createvm", regionName, func(r *region) error {
		if _, ok := r.vms[spec.Name]; ok {
			return &APIError{409, "name_taken", fmt.Sprintf("a VM named %q already exists", spec.Name)}
		}
		if !slices.Contains(c.images, spec.Image) {
			return &APIError{400, "invalid_image", fmt.Sprintf("image %q does not exist", spec.Image)}
		}
		vm := &VM{
			Region: regionName, Name: spec.Name, Power: "defined", Labels: maps.Clone(spec.Labels),
			SeedVolume: spec.SeedVolume, MachineType: spec.MachineType, Image: spec.Image,
			CPUs: spec.CPUs, MemoryMiB: spec.MemoryMiB, Created: time.Now().UTC().Truncate(time.Second),
		}
		if spec.Network != nil {
			n := *spec.Network
			n.DNS = slices.Clone(n.DNS)
			vm.Network = &n
		}
		r.vms[spec.Name] = vm
		if fault := c.afterOp["createvm"]; fault != nil {
			delete(c.afterOp, "createvm")
			return fault
		}
		out = vm.copy()
		return nil
	})
	return out, err
}

// StartVM powers a VM on.
func (c *Cloud) StartVM(ctx context.Context, token, regionName, name string) error {
	return c.onVM(ctx, token, "startvm", regionName, name, func(vm *VM) error {
		switch {
		case vm.Lock != "":
			return &APIError{409, "locked", fmt.Sprintf("VM %q is locked (%s)", name, vm.Lock)}
		case vm.Deleting:
			return &APIError{409, "deleting", fmt.Sprintf("VM %q is being deleted", name)}
		}
		vm.Power, vm.Started = "running", true
		return nil
	})
}

// GetVM returns a VM.
func (c *Cloud) GetVM(ctx context.Context, token, regionName, name string) (VM, error) {
	var out VM
	err := c.onVM(ctx, token, "getvm", regionName, name, func(vm *VM) error {
		out = vm.copy()
		return nil
	})
	return out, err
}

// ListVMs returns the VMs of a region whose label key has value, filtered
// on the server.
// A listing held by HoldListings waits after its snapshot, as a large
// region takes a while to read.
func (c *Cloud) ListVMs(ctx context.Context, token, regionName, key, value string) ([]VM, error) {
	c.mu.Lock()
	c.listings++
	c.mu.Unlock()
	var out []VM
	err := c.inRegion(ctx, token, "listvms", regionName, func(r *region) error {
		for _, name := range slices.Sorted(maps.Keys(r.vms)) {
			if vm := r.vms[name]; vm.Labels[key] == value {
				out = append(out, vm.copy())
			}
		}
		return nil
	})
	if err == nil {
		err = c.listGate.Pass(ctx)
	}
	return out, err
}

// DeleteVM starts a VM's deletion and answers at once; the VM is
// "deleting" for deleteDelay, then gone. A locked VM is a 409.
func (c *Cloud) DeleteVM(ctx context.Context, token, regionName, name string) error {
	return c.onVM(ctx, token, "deletevm", regionName, name, func(vm *VM) error {
		switch {
		case vm.Lock != "":
			return &APIError{409, "locked", fmt.Sprintf("VM %q is locked (%s)", name, vm.Lock)}
		case vm.Deleting:
			return nil
		}
		vm.Deleting, vm.Power = true, "stopped"
		r := c.regions[regionName]
		r.detach(name)
		if c.deleteDelay == 0 {
			delete(r.vms, name)
			return nil
		}
		time.AfterFunc(c.deleteDelay, func() { c.remove(vm) })
		return nil
	})
}

// remove forgets vm if it is still the VM stored under its name.
func (c *Cloud) remove(vm *VM) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.regions[vm.Region]; r.vms[vm.Name] == vm {
		delete(r.vms, vm.Name)
	}
}

func (vm *VM) copy() VM {
	out := *vm
	out.Labels = maps.Clone(vm.Labels)
	out.IPs = slices.Clone(vm.IPs)
	if vm.Network != nil {
		n := *vm.Network
		n.DNS = slices.Clone(n.DNS)
		out.Network = &n
	}
	return out
}
