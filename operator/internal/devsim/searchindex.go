package devsim

import (
	"strings"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// lockedSearchIndex is vcsim's SearchIndex whose FindChild holds the
// searched folder's lock, as vCenter never shows a VM before it has its
// name. govmomi v0.56.0's vcsim adds a VM being created to its folder
// before it names it (simulator/virtual_machine.go:168, the name set at
// :1243; the creating task holds the folder's lock meanwhile, task.go
// :113-122), and its FindChild reads the folder's children unlocked
// (search_index.go:92): meeting the unnamed VM, entityName panics
// (registry.go:450) while SearchIndex's own lock is held, and
// Registry.WithLock releases it without a defer (registry.go:693-697), so
// every later FindChild waits for ever. A fleet benchmark of 1,000 clones
// into one folder met it (the fleet benchmark, docs/performance.md). vcsim finds a method by reflection on
// the object registered under the reference, so this one's win.
type lockedSearchIndex struct {
	*simulator.SearchIndex
	root types.ManagedObjectReference
}

// lockSearchIndex registers the locked SearchIndex in the model's registry
// in place of vcsim's own.
func lockSearchIndex(model *simulator.Model) {
	r := model.Map()
	root := r.Get(vim25.ServiceInstance).(*simulator.ServiceInstance).Content.RootFolder
	r.Put(&lockedSearchIndex{SearchIndex: r.SearchIndex(), root: root})
}

// FindChild waits for a creation under way in the folder: the task holds
// the folder's lock until the VM has its name.
func (s *lockedSearchIndex) FindChild(ctx *simulator.Context, req *types.FindChild) soap.HasFault {
	obj := ctx.Map.Get(req.Entity)
	if obj == nil {
		return s.SearchIndex.FindChild(ctx, req) // its ManagedObjectNotFound
	}
	var res soap.HasFault
	ctx.WithLock(obj, func() { res = s.SearchIndex.FindChild(ctx, req) })
	return res
}

// FindByInventoryPath is vcsim's (search_index.go:41-72) walking with the
// locked FindChild: the embedded one calls its own.
func (s *lockedSearchIndex) FindByInventoryPath(ctx *simulator.Context, req *types.FindByInventoryPath) soap.HasFault {
	body := &methods.FindByInventoryPathBody{Res: new(types.FindByInventoryPathResponse)}
	o := &s.root
	if req.InventoryPath == "/" {
		body.Res.Returnval = o
		return body
	}
	path := strings.FieldsFunc(req.InventoryPath, func(c rune) bool { return c == '/' })
	if len(path) < 1 {
		return body
	}
	for _, name := range path {
		if o = s.FindChild(ctx, &types.FindChild{Entity: *o, Name: name}).(*methods.FindChildBody).Res.Returnval; o == nil {
			break
		}
	}
	body.Res.Returnval = o
	return body
}
