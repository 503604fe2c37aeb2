// Package memprovider is the reference provider: a complete
// contract.Provider over an in-memory Cloud that passes the whole
// conformance harness. It shows, in the file names every provider uses
// (config.go, provider.go, states.go, classify.go, checker.go), what each
// part of a provider does; control.go is the harness's backend control.
//
// Its profiles (contract §4): primary-key name-is-key; providerID
// <region>/<name>; readiness provisioning-window; ip-source discovered
// (the Cloud's guest report); gc-mark native-labels; created-at
// backend-timestamp; provisioning-state native; create-return submit;
// async-ops backend-lock; delete-return returns-early;
// secondary-resources explicit (the seed volume "<name>-seed");
// list-partial fail-whole; not-found status-404; quota detected;
// credentials environment (a token in the config); client-kind thin-client;
// child-spans span-decorator; timeouts per-call; logging tiered.
package memprovider

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Type is the provider's type in the providers config.
const Type = "memory"

// ids is the providerID format: <region>/<name>.
var ids = contract.IDFormat{
	Location: regionRE,
	Key:      regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`),
}

// Provider is the reference provider.
type Provider struct {
	cfg   Config
	cloud *Cloud
}

var (
	_ contract.Provider     = (*Provider)(nil)
	_ contract.Checker      = (*Provider)(nil)
	_ contract.EgressKeeper = (*Provider)(nil)
)

// New validates cfg and returns a provider for cloud. It makes no call
// (contract §7: the constructor never dials).
func New(cfg Config, cloud *Cloud) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("memory provider config: %w", err)
	}
	return &Provider{cfg: cfg.withDefaults(), cloud: cloud}, nil
}

// Create validates req, then walks the steps below; each finds the result
// of an earlier, cut-off attempt and carries on from it (template entry 10).
//  1. look the VM up by name: ours → resume it; not ours → collision;
//  2. create the seed volume (exists → ours from an earlier attempt);
//  3. create the VM with its labels (name taken → a racing attempt: resume);
//  4. with Config.Egress, find or allocate the replica's egress address
//     (allocated with its marks in one call) and attach it;
//  5. start it.
func (p *Provider) Create(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
	spec, err := p.vmSpec(req)
	if err != nil {
		return contract.Instance{}, err
	}
	region := req.Placement.Region
	log := logr.FromContextOrDiscard(ctx).WithValues(contract.LogKeyInstance, req.Name)
	ctx = logr.NewContext(ctx, log)

	vm, err := p.getVM(ctx, region, req.Name)
	switch {
	case errors.Is(err, contract.ErrNotFound):
		if vm, err = p.createVM(ctx, region, spec, req.CloudInit); err != nil {
			return contract.Instance{}, err
		}
		log.V(contract.LogOutcome).Info("created instance", "region", region)
	case err != nil:
		return contract.Instance{}, err
	case vm.Labels[contract.LabelUID] != req.UID || vm.Labels[contract.LabelManaged] == "":
		// Any managed value will do: the same UID under another Owner is
		// this Proxy's instance from a renamed install or entry, or from a
		// release before marks named their owner.
		return contract.Instance{}, contract.Permanentf("instance %q already exists in region %q and does not belong to this Proxy (uid %s)", req.Name, region, req.UID)
	case vm.Deleting:
		return contract.Instance{}, fmt.Errorf("instance %q in region %q is being deleted; retry when it is gone", req.Name, region)
	default:
		log.V(contract.LogStep).Info("found instance from an earlier attempt")
	}
	if p.cfg.Egress {
		if vm.EgressIP, err = p.attachEgress(ctx, req); err != nil {
			return contract.Instance{}, err
		}
	}
	if !vm.Started {
		if err := p.do(ctx, "StartVM", func(ctx context.Context) error {
			return p.cloud.StartVM(ctx, p.cfg.Token, region, req.Name)
		}); err != nil {
			return contract.Instance{}, err
		}
		vm.Started, vm.Power = true, "running"
		log.V(contract.LogStep).Info("started instance")
	}
	return instance(vm), nil
}

// createVM runs steps 2 and 3 of Create.
func (p *Provider) createVM(ctx context.Context, region string, spec VMSpec, cloudInit []byte) (VM, error) {
	err := p.do(ctx, "CreateVolume", func(ctx context.Context) error {
		return p.cloud.CreateVolume(ctx, p.cfg.Token, region, spec.SeedVolume, cloudInit)
	})
	if err != nil && !isConflict(err) {
		return VM{}, err
	}
	var vm VM
	err = p.do(ctx, "CreateVM", func(ctx context.Context) (err error) {
		vm, err = p.cloud.CreateVM(ctx, p.cfg.Token, region, spec)
		return err
	})
	switch {
	case isConflict(err):
		// Another attempt won the race for the name; resume from its VM.
		return p.getVM(ctx, region, spec.Name)
	case err != nil:
		p.dropOrphanSeed(ctx, region, spec)
	}
	return vm, err
}

// dropOrphanSeed deletes the seed volume of a VM whose creation failed,
// so a Create refused for good (quota, a bad image) leaves no volume, which
// no sweep would find, holding the cloud-init. A VM that exists after all
// (the answer was lost, not the request) keeps its seed for the retry.
func (p *Provider) dropOrphanSeed(ctx context.Context, region string, spec VMSpec) {
	if _, err := p.getVM(ctx, region, spec.Name); !errors.Is(err, contract.ErrNotFound) {
		return
	}
	err := p.do(ctx, "DeleteVolume", func(ctx context.Context) error {
		return p.cloud.DeleteVolume(ctx, p.cfg.Token, region, spec.SeedVolume)
	})
	if err != nil && !errors.Is(err, contract.ErrNotFound) {
		logr.FromContextOrDiscard(ctx).Info("could not delete the seed volume of a failed create; the next Create or Delete retries",
			"volume", spec.SeedVolume, "error", err.Error())
	}
}

// vmSpec validates req against the catalogues, before any Cloud call.
func (p *Provider) vmSpec(req contract.CreateRequest) (VMSpec, error) {
	if err := req.Validate(); err != nil {
		return VMSpec{}, err
	}
	if err := contract.CloudInitFits(req.CloudInit, MaxVolumeBytes, "the seed volume"); err != nil {
		return VMSpec{}, err
	}
	pl := req.Placement
	if !slices.Contains(p.cfg.Regions, pl.Region) {
		return VMSpec{}, contract.InvalidField("placement.region", pl.Region, "not a configured region ("+strings.Join(p.cfg.Regions, ", ")+")")
	}
	if pl.Zone != "" {
		return VMSpec{}, contract.InvalidField("placement.zone", pl.Zone, "the memory provider has no zones; leave it empty")
	}
	mt, err := contract.Lookup("placement.machineType", p.cfg.MachineTypes, pl.MachineType)
	if err != nil {
		return VMSpec{}, err
	}
	image, err := contract.Lookup("placement.image", p.cfg.Images, pl.Image)
	if err != nil {
		return VMSpec{}, err
	}
	return VMSpec{
		Name:        req.Name,
		Labels:      map[string]string{contract.LabelManaged: req.Owner, contract.LabelUID: req.UID},
		SeedVolume:  seedVolume(req.Name),
		MachineType: pl.MachineType, Image: image, CPUs: mt.CPUs, MemoryMiB: mt.MemoryMiB,
		Network: req.Network,
	}, nil
}

// Get reads the VM and maps its state.
func (p *Provider) Get(ctx context.Context, providerID string) (contract.Instance, error) {
	region, name, err := ids.Parse(providerID)
	if err != nil {
		return contract.Instance{}, err
	}
	if !slices.Contains(p.cfg.Regions, region) {
		return contract.Instance{}, contract.InvalidField("providerID", providerID, "region "+region+" is not configured")
	}
	ctx = logr.NewContext(ctx, logr.FromContextOrDiscard(ctx).WithValues(contract.LogKeyInstance, providerID))
	vm, err := p.getVM(ctx, region, name)
	if err != nil {
		return contract.Instance{}, err
	}
	return instance(vm), nil
}

// Delete removes the VM, then its seed volume; every step treats "already
// gone" and "already going" as done (template entry 11).
func (p *Provider) Delete(ctx context.Context, providerID string) error {
	region, name, err := ids.Parse(providerID)
	if err != nil {
		return err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues(contract.LogKeyInstance, providerID)
	if !slices.Contains(p.cfg.Regions, region) {
		log.Info("region is no longer configured; nothing to delete", "region", region)
		return nil
	}
	ctx = logr.NewContext(ctx, log)
	err = p.do(ctx, "DeleteVM", func(ctx context.Context) error {
		return p.cloud.DeleteVM(ctx, p.cfg.Token, region, name)
	})
	if err != nil && !errors.Is(err, contract.ErrNotFound) {
		return err
	}
	err = p.do(ctx, "DeleteVolume", func(ctx context.Context) error {
		return p.cloud.DeleteVolume(ctx, p.cfg.Token, region, seedVolume(name))
	})
	if err != nil && !errors.Is(err, contract.ErrNotFound) {
		return err
	}
	log.V(contract.LogOutcome).Info("deleted instance")
	return nil
}

// ListByTag lists every configured region, filtering on the Cloud; one
// unreadable region fails the whole list (list-partial: fail-whole).
func (p *Provider) ListByTag(ctx context.Context, key, value string) ([]contract.Instance, error) {
	var out []contract.Instance
	for _, region := range p.cfg.Regions {
		var vms []VM
		err := p.do(ctx, "ListVMs", func(ctx context.Context) (err error) {
			vms, err = p.cloud.ListVMs(ctx, p.cfg.Token, region, key, value)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("list region %q: %w", region, err)
		}
		for _, vm := range vms {
			// The UID label alone is not the operator's: a copy of its VM
			// with the managed label taken off keeps it.
			if vm.Labels[contract.LabelManaged] != "" {
				out = append(out, instance(vm))
			}
		}
	}
	return out, nil
}

func (p *Provider) getVM(ctx context.Context, region, name string) (vm VM, err error) {
	err = p.do(ctx, "GetVM", func(ctx context.Context) (err error) {
		vm, err = p.cloud.GetVM(ctx, p.cfg.Token, region, name)
		return err
	})
	return vm, err
}

// do runs one Cloud call: bounded by the call timeout (contract §1.5),
// under a child span (§12), logged at the call tier, and classified.
func (p *Provider) do(ctx context.Context, call string, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	defer cancel()
	ctx, span := contract.StartSpan(ctx, "memcloud."+call)
	start := time.Now()
	err := classify(fn(ctx))
	contract.EndSpan(span, err)
	logr.FromContextOrDiscard(ctx).V(contract.LogCall).Info("cloud call", "call", call,
		"duration", time.Since(start), "class", contract.ClassOf(err))
	if err != nil {
		return fmt.Errorf("memcloud %s: %w", call, err)
	}
	return nil
}

func instance(vm VM) contract.Instance {
	state, ip := stateOf(vm)
	return contract.Instance{
		ProviderID: ids.Format(vm.Region, vm.Name),
		Name:       vm.Name,
		State:      state,
		IP:         ip,
		EgressIP:   vm.EgressIP,
		UID:        vm.Labels[contract.LabelUID],
		Owner:      vm.Labels[contract.LabelManaged],
		CreatedAt:  vm.Created,
	}
}

func seedVolume(name string) string { return name + "-seed" }

func isConflict(err error) bool {
	var api *APIError
	return errors.As(err, &api) && api.Status == 409
}
