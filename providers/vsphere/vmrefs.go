package vsphere

import (
	"sync"

	"github.com/vmware/govmomi/vim25/types"
)

// vmRefs remembers each instance VM's reference by region and name, so a
// Get or Delete reads the VM in one call rather than finding it by name
// first (SearchIndex.FindChild, then the read): a Ready Proxy's resync is
// one SOAP call, not two (the fleet benchmark, docs/performance.md). It learns references from lookups,
// clones and folder listings. A read by a remembered reference counts only
// if it finds a VM of that name in the region's folder; else the entry is
// forgotten and the VM found by name, so a VM destroyed, renamed, moved or
// made again under its name is never taken for another.
type vmRefs struct {
	mu      sync.Mutex
	regions map[string]map[string]types.ManagedObjectReference
}

func (r *vmRefs) get(region, name string) (types.ManagedObjectReference, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref, ok := r.regions[region][name]
	return ref, ok
}

func (r *vmRefs) put(region, name string, ref types.ManagedObjectReference) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.regions == nil {
		r.regions = map[string]map[string]types.ManagedObjectReference{}
	}
	if r.regions[region] == nil {
		r.regions[region] = map[string]types.ManagedObjectReference{}
	}
	r.regions[region][name] = ref
}

func (r *vmRefs) forget(region, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.regions[region], name)
}

// replace makes the region's entries the VMs a listing of its folder
// found: what the folder no longer holds is not remembered for ever.
func (r *vmRefs) replace(region string, vms []vmRead) {
	refs := make(map[string]types.ManagedObjectReference, len(vms))
	for _, vm := range vms {
		refs[vm.Name] = vm.Reference()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.regions == nil {
		r.regions = map[string]map[string]types.ManagedObjectReference{}
	}
	r.regions[region] = refs
}
