package vsphere

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// The read path: what Get, ListByTag and Create's lookups fetch of a VM,
// and how a list pages through a folder (spec entries 9 and 12).
//
// A VM's extraConfig holds the cloud-init (up to 87 KiB of base64), so a
// read asks for the marks alone, one element of the array each: the
// property collector selects an array element by its key
// (`config.extraConfig["egressproxies.uid"]`), answering the OptionValue,
// or nothing when the VM has no such key. The vSphere Web Services SDK
// Programming Guide, "Nested Properties and Property Paths"; govmomi's
// mo.Field (vim25/mo/type_info.go) parses such a path, and vcsim serves it
// since govmomi v0.38 (simulator/property_collector.go fieldValueKey,
// vmware/govmomi#3451), as Apache CloudStack's VMware plugin and
// vm-operator have long read `config.extraConfig["…"]` from vCenter.
var (
	markKeys = []string{markManaged, markUID, markStarted, markDeleting, markAddress}
	// vmProps are the properties every read fetches of a VM, and taskProps
	// those of each task in its recentTask (the destroy a VM is under).
	vmProps   = append([]string{"name", "config.createDate", "runtime.powerState", "guest.net", "guest.ipAddress", "recentTask"}, markPaths(markKeys)...)
	taskProps = []string{"info.descriptionId", "info.state"}
)

// listPage is the most objects (VMs and their recent tasks) one answer of
// a list carries (RetrieveOptions.maxObjects): at 1,000 VMs a sweep is
// several answers of a few hundred KiB, each in its own call budget,
// rather than one. vCenter may answer fewer; the token brings the rest
// (API reference, RetrieveOptions, RetrieveResult). A variable so the
// benchmark can read a folder in one answer as before (0: no maximum).
var listPage int32 = 250

func markPaths(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = (&mo.Field{Path: "config.extraConfig", Key: k}).String()
	}
	return out
}

// vmRead is one VM as a read finds it: Config carries the createDate and
// the marks alone in its ExtraConfig.
type vmRead struct {
	mo.VirtualMachine
	// destroying says a destroy task is queued or running on the VM:
	// another Delete's, or that of a Delete cut off while it waited.
	destroying bool
}

// vmFilter asks for the VM obj names, or with container the VMs of the
// container view obj names, each with the state of the tasks in its
// recentTask, found by traversing it; more are properties asked of the
// VM besides vmProps.
func vmFilter(obj types.ManagedObjectReference, container bool, more ...string) types.PropertyFilterSpec {
	tasks := &types.TraversalSpec{Type: "ManagedEntity", Path: "recentTask"}
	spec := types.ObjectSpec{Obj: obj, SelectSet: []types.BaseSelectionSpec{tasks}}
	if container {
		spec.Skip = types.NewBool(true)
		spec.SelectSet = []types.BaseSelectionSpec{&types.TraversalSpec{Type: "ContainerView", Path: "view", SelectSet: spec.SelectSet}}
	}
	return types.PropertyFilterSpec{
		ObjectSet: []types.ObjectSpec{spec},
		PropSet:   []types.PropertySpec{{Type: "VirtualMachine", PathSet: append(slices.Clip(vmProps), more...)}, {Type: "Task", PathSet: taskProps}},
	}
}

// readVMs reads the VM ref names, in one call (a VM and its few recent
// tasks make one answer), with the properties more besides vmProps.
func readVMs(ctx context.Context, c *vim25.Client, ref types.ManagedObjectReference, more ...string) ([]vmRead, error) {
	res, err := mo.RetrievePropertiesEx(ctx, c, types.RetrievePropertiesEx{
		This:    c.ServiceContent.PropertyCollector,
		SpecSet: []types.PropertyFilterSpec{vmFilter(ref, false, more...)},
	})
	if err != nil {
		return nil, err
	}
	return decodeVMs(res)
}

// errSessionChanged ends a list whose session was replaced between two of
// its pages: a token is good only in the session it was returned in (API
// reference, RetrieveResult.token). The next sweep starts over.
var errSessionChanged = errors.New("the session changed during the list; its remaining pages are lost")

// listFolder reads every VM of the region's folder: a listing begun after
// the call, shared with the calls that arrived during the one before it
// (sharedlist.go).
func (p *Provider) listFolder(ctx context.Context, regionName string) ([]vmRead, error) {
	p.mu.Lock()
	lists, ok := p.lists[regionName]
	if !ok {
		lists = &freshCall[[]vmRead]{}
		p.lists[regionName] = lists
	}
	p.mu.Unlock()
	return lists.do(ctx, func(ctx context.Context) ([]vmRead, error) {
		vms, err := p.readFolder(ctx, regionName)
		if err == nil {
			p.vms.replace(regionName, vms)
		}
		return vms, err
	})
}

// readFolder reads every VM of the region's folder, through the folder's
// container view: a page of listPage objects a call, each call in its own
// budget. Only the folder's own VMs, not its subfolders': an instance's key is its
// name in the folder, and Get and Delete find it with
// SearchIndex.FindChild, which searches only the immediate children (API
// reference, vim.SearchIndex.findChild). A VM listed from a subfolder
// would read as gone under its providerID, and its Delete would return
// nil and leave it. A list cut off between pages cancels the rest of its
// retrieval.
func (p *Provider) readFolder(ctx context.Context, regionName string) ([]vmRead, error) {
	var (
		client *vim25.Client
		page   *types.RetrieveResult
	)
	err := p.do(ctx, "ListVMs", p.cfg.CallTimeout.Duration, func(ctx context.Context, c *vim25.Client) error {
		v, err := p.folderView(ctx, c, regionName)
		if err != nil {
			return err
		}
		res, err := methods.RetrievePropertiesEx(ctx, c, &types.RetrievePropertiesEx{
			This:    c.ServiceContent.PropertyCollector,
			SpecSet: []types.PropertyFilterSpec{vmFilter(v.Reference(), true)},
			Options: types.RetrieveOptions{MaxObjects: listPage},
		})
		if err != nil {
			return err
		}
		client, page = c, res.Returnval
		return nil
	})
	if err != nil {
		return nil, err
	}
	var contents []types.ObjectContent
	token := ""
	if page != nil {
		contents, token = page.Objects, page.Token
	}
	for token != "" {
		err := p.do(ctx, "ListVMsPage", p.cfg.CallTimeout.Duration, func(ctx context.Context, c *vim25.Client) error {
			if c != client {
				return errSessionChanged
			}
			res, err := methods.ContinueRetrievePropertiesEx(ctx, c, &types.ContinueRetrievePropertiesEx{This: c.ServiceContent.PropertyCollector, Token: token})
			if err != nil {
				return err
			}
			contents, token = append(contents, res.Returnval.Objects...), res.Returnval.Token
			return nil
		})
		if err != nil {
			p.cancelRetrieval(ctx, client, token)
			return nil, err
		}
	}
	return decodeVMs(contents)
}

// folderView returns the container view of the region's folder's VMs,
// made once a session: a view "always represents the current
// configuration of the virtual environment and reflects any subsequent
// changes that occur" (API reference, vim.view.ContainerView), and
// "exists until you terminate it by calling the DestroyView method, or
// until the end of the session" (vim.view.View), so one per folder serves
// every listing. Making and destroying one per listing was two of a
// listing's three calls (the fleet benchmark, docs/performance.md). vcsim keeps its views current the
// same way (simulator/view_manager.go, ContainerView.PutObject and
// RemoveObject). A view vCenter no longer knows is dropped by
// forgetMissing and made again.
func (p *Provider) folderView(ctx context.Context, c *vim25.Client, regionName string) (*view.ContainerView, error) {
	key := "view " + regionName
	p.mu.Lock()
	cached, ok := p.refs[key].(*view.ContainerView)
	p.mu.Unlock()
	if ok {
		return cached, nil
	}
	folder, err := p.folder(ctx, c, regionName)
	if err != nil {
		return nil, err
	}
	v, err := view.NewManager(c).CreateContainerView(ctx, folder.Reference(), []string{"VirtualMachine"}, false)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.client == c {
		p.refs[key] = v
	}
	p.mu.Unlock()
	return v, nil
}

// cancelRetrieval cancels a retrieval left with token (API reference,
// PropertyCollector.CancelRetrievePropertiesEx: it discards the remaining
// results), even when ctx is done, in a call budget of its own. Best
// effort: what vCenter keeps, it drops with the session.
func (p *Provider) cancelRetrieval(ctx context.Context, c *vim25.Client, token string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.CallTimeout.Duration)
	defer cancel()
	_, _ = methods.CancelRetrievePropertiesEx(cctx, c, &types.CancelRetrievePropertiesEx{This: c.ServiceContent.PropertyCollector, Token: token})
}

// decodeVMs turns a retrieval's answer into the VMs it found, each with
// whether a destroy is under way on it.
func decodeVMs(contents []types.ObjectContent) ([]vmRead, error) {
	destroying := map[types.ManagedObjectReference]bool{}
	var vms []mo.VirtualMachine
	for _, oc := range contents {
		if err := missing(oc); err != nil {
			return nil, err
		}
		switch oc.Obj.Type {
		case "Task":
			var task mo.Task
			if err := mo.LoadObjectContent([]types.ObjectContent{oc}, &task); err != nil {
				return nil, err
			}
			under := task.Info.State == types.TaskInfoStateQueued || task.Info.State == types.TaskInfoStateRunning
			destroying[oc.Obj] = task.Info.DescriptionId == destroyTask && under
		case "VirtualMachine":
			vm, err := decodeVM(oc)
			if err != nil {
				return nil, err
			}
			vms = append(vms, vm)
		}
	}
	out := make([]vmRead, len(vms))
	for i, vm := range vms {
		out[i] = vmRead{VirtualMachine: vm, destroying: slices.ContainsFunc(vm.RecentTask, func(t types.ManagedObjectReference) bool { return destroying[t] })}
	}
	return out, nil
}

// decodeVM loads a VM's properties; each mark read by its key comes as an
// OptionValue of its own and joins Config.ExtraConfig. A key the VM lacks
// comes as nothing at all (vcsim drops the empty property; a nil value is
// skipped the same), so it reads as absent. The marks are taken out before
// mo.LoadObjectContent, which would append each to ExtraConfig but set it
// to nil for a nil value, losing the marks before it (vim25/mo/type_info.go
// assignValue).
func decodeVM(oc types.ObjectContent) (mo.VirtualMachine, error) {
	var vm mo.VirtualMachine
	var marks []types.BaseOptionValue
	rest := oc.PropSet[:0:0]
	for _, prop := range oc.PropSet {
		var f mo.Field
		if f.FromString(prop.Name) && f.Key != nil {
			if v := optionValue(prop.Val); v != nil {
				marks = append(marks, v)
			}
			continue
		}
		rest = append(rest, prop)
	}
	if err := mo.LoadObjectContent([]types.ObjectContent{{Obj: oc.Obj, PropSet: rest}}, &vm); err != nil {
		return vm, err
	}
	if len(marks) > 0 {
		if vm.Config == nil {
			vm.Config = &types.VirtualMachineConfigInfo{}
		}
		vm.Config.ExtraConfig = append(vm.Config.ExtraConfig, marks...)
	}
	return vm, nil
}

func optionValue(val types.AnyType) *types.OptionValue {
	switch v := val.(type) {
	case types.OptionValue:
		return &v
	case *types.OptionValue:
		return v
	}
	return nil
}

// missing fails a read vCenter answered only in part: a property it could
// not read comes in the object's missingSet with its fault, SystemError or
// SecurityError (API reference, MissingProperty.fault). Either on a mark
// would make a marked VM read as unmarked, so it fails the read with its
// fault, classified. InvalidProperty is vcsim's answer for a property
// under an unset parent (guest.net of a VM without guest info,
// simulator/property_collector.go collectFields), which reads as unset.
func missing(oc types.ObjectContent) error {
	for _, m := range oc.MissingSet {
		if _, ok := m.Fault.Fault.(*types.InvalidProperty); ok {
			continue
		}
		return missingError{obj: oc.Obj, prop: m}
	}
	return nil
}

type missingError struct {
	obj  types.ManagedObjectReference
	prop types.MissingProperty
}

func (e missingError) Error() string {
	msg := e.prop.Fault.LocalizedMessage
	if msg == "" {
		msg = fmt.Sprintf("%T", e.prop.Fault.Fault)
	}
	return fmt.Sprintf("%s: property %s not read: %s", e.obj, e.prop.Path, msg)
}

// GetLocalizedMethodFault lets classify see the fault (govmomi fault.As).
func (e missingError) GetLocalizedMethodFault() *types.LocalizedMethodFault {
	return &e.prop.Fault
}
