package vsphere

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// tapFunc sees a call through the test's front and vcsim's answer to it.
type tapFunc func(r *http.Request, call, answer []byte)

// retrievals records the answers to the property collector's retrievals
// that pass the front while it is set.
type retrievals struct {
	mu      sync.Mutex
	answers [][]byte
}

// watch sets the front's tap to record every retrieval's answer until the
// returned function is called.
func (r *retrievals) watch(v *vcsim) (stop func()) {
	var tap tapFunc = func(_ *http.Request, call, answer []byte) {
		if !bytes.Contains(call, []byte("RetrievePropertiesEx")) && !bytes.Contains(call, []byte("<RetrieveProperties ")) {
			return
		}
		r.mu.Lock()
		r.answers = append(r.answers, bytes.Clone(answer))
		r.mu.Unlock()
	}
	v.tap.Store(&tap)
	return func() { v.tap.Store(nil) }
}

func (r *retrievals) take() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.answers
	r.answers = nil
	return out
}

// TestReadsLeaveTheCloudInit: Create, Get and ListByTag read the marks of
// a VM, never the rest of its extraConfig, where the cloud-init lives (up to
// 87 KiB of base64 a VM: tens of MB a sweep at 1,000 VMs when lists read
// it all). The answers vcsim gives to the retrievals of each read must
// carry the VM's Owner and UID and none of its user-data.
func TestReadsLeaveTheCloudInit(t *testing.T) {
	v := startVcsim(t)
	p := v.provider(t)
	ctx := context.Background()
	cloudInit := bytes.Repeat([]byte("#cloud-config\n# read-sentinel-5e1f\n"), MaxCloudInit/36)
	userdata := []byte(base64.StdEncoding.EncodeToString(cloudInit))[:64]
	req := contract.CreateRequest{
		Name: "big", UID: "uid-big", Owner: testOwner, CloudInit: cloudInit, Port: 3128,
		Placement: contract.Placement{Region: "dc0", Zone: "c0", MachineType: "small", Image: "debian-12"},
	}
	var inst contract.Instance

	var r retrievals
	defer r.watch(v)()
	for _, read := range []struct {
		name string
		run  func() ([]contract.Instance, error)
	}{
		// Create reads the clone it made, and a repeat Create the VM it
		// finds.
		{"Create", func() ([]contract.Instance, error) {
			var err error
			inst, err = p.Create(ctx, req)
			return []contract.Instance{inst}, err
		}},
		{"Create (repeat)", func() ([]contract.Instance, error) {
			got, err := p.Create(ctx, req)
			return []contract.Instance{got}, err
		}},
		{"Get", func() ([]contract.Instance, error) {
			got, err := p.Get(ctx, inst.ProviderID)
			return []contract.Instance{got}, err
		}},
		{"ListByTag(managed)", func() ([]contract.Instance, error) { return p.ListByTag(ctx, contract.LabelManaged, testOwner) }},
		{"ListByTag(uid)", func() ([]contract.Instance, error) { return p.ListByTag(ctx, contract.LabelUID, "uid-big") }},
	} {
		got, err := read.run()
		if err != nil {
			t.Fatalf("%s: %v", read.name, err)
		}
		if len(got) != 1 || got[0].UID != "uid-big" || got[0].Owner != testOwner {
			t.Errorf("%s = %+v, want the VM with its UID and Owner", read.name, got)
		}
		answers := r.take()
		if len(answers) == 0 {
			t.Fatalf("%s: no retrieval passed the front", read.name)
		}
		var all []byte
		for _, a := range answers {
			all = append(all, a...)
		}
		// The answers are read as sent: the Owner must be in them, or the
		// check below would pass on bytes it cannot read.
		if !bytes.Contains(all, []byte(testOwner)) {
			t.Fatalf("%s: the retrievals' answers do not carry the Owner %q: the tap cannot read them", read.name, testOwner)
		}
		for _, leak := range [][]byte{userdata, []byte("guestinfo.userdata"), []byte("guestinfo.metadata")} {
			if bytes.Contains(all, leak) {
				t.Errorf("%s retrieved %q: %d bytes in %d answers carry the VM's cloud-init", read.name, leak[:min(len(leak), 24)], len(all), len(answers))
				break
			}
		}
	}
}

// pages is the control's account of a paged retrieval through the front:
// the token each answer returned, the session it was returned in, and
// each Continue's token. vcsim keeps tokens in one book for all sessions
// and never refuses one; vCenter takes a token once, only in the session
// that was given it (API reference, RetrieveResult.token), so the control
// records a token used twice or in another session as a violation.
type pages struct {
	mu         sync.Mutex
	issued     map[string]string // token -> session cookie
	continues  int
	violations []string
}

var tokenRE = regexp.MustCompile(`<token>([^<]+)</token>`)

func (pg *pages) watch(v *vcsim) (stop func()) {
	pg.issued = map[string]string{}
	var tap tapFunc = func(r *http.Request, call, answer []byte) {
		cookie := ""
		if c, err := r.Cookie("vmware_soap_session"); err == nil {
			cookie = c.Value
		}
		pg.mu.Lock()
		defer pg.mu.Unlock()
		if bytes.Contains(call, []byte("<ContinueRetrievePropertiesEx")) {
			pg.continues++
			if m := tokenRE.FindSubmatch(call); m != nil {
				owner, ok := pg.issued[string(m[1])]
				switch {
				case !ok:
					pg.violations = append(pg.violations, "token "+string(m[1])+" used twice or never issued")
				case owner != cookie:
					pg.violations = append(pg.violations, "token "+string(m[1])+" used in another session")
				}
				delete(pg.issued, string(m[1]))
			}
		}
		if bytes.Contains(call, []byte("RetrievePropertiesEx")) {
			if m := tokenRE.FindSubmatch(answer); m != nil {
				pg.issued[string(m[1])] = cookie
			}
		}
	}
	v.tap.Store(&tap)
	return func() { v.tap.Store(nil) }
}

func (pg *pages) check(t *testing.T) {
	t.Helper()
	pg.mu.Lock()
	defer pg.mu.Unlock()
	for _, v := range pg.violations {
		t.Errorf("the provider broke vCenter's rule for retrieval tokens: %s", v)
	}
}

// withListPage sets the list's page size for one test.
func withListPage(t *testing.T, n int32) {
	saved := listPage
	listPage = n
	t.Cleanup(func() { listPage = saved })
}

// TestListPagesThroughTheFolder: a list whose VMs and tasks need several
// answers reads them all, page by page, each token once in its session.
func TestListPagesThroughTheFolder(t *testing.T) {
	v := startVcsim(t)
	p := v.provider(t)
	want := map[string]string{}
	for _, name := range []string{"page-a", "page-b", "page-c"} {
		want[createVM(t, p, name, "uid-"+name, testOwner).ProviderID] = testOwner
	}
	withListPage(t, 2)
	var pg pages
	defer pg.watch(v)()
	if got := listed(t, p, contract.LabelManaged, testOwner); !maps.Equal(got, want) {
		t.Errorf("ListByTag in pages of 2 = %v, want %v", got, want)
	}
	pg.check(t)
	if pg.continues < 1 {
		t.Errorf("ListByTag in pages of 2 made %d ContinueRetrievePropertiesEx calls for 3 VMs and their tasks, want at least 1", pg.continues)
	}
}

// TestListAcrossSessionsFailsWhole: when the session ends between two
// pages of a list, the provider logs in again, but the token is not good
// in the new session: the list fails, transient, rather than return the
// first page as the folder; the next list reads every VM.
func TestListAcrossSessionsFailsWhole(t *testing.T) {
	v := startVcsim(t)
	p := v.provider(t)
	want := map[string]string{}
	for _, name := range []string{"sess-a", "sess-b", "sess-c"} {
		want[createVM(t, p, name, "uid-"+name, testOwner).ProviderID] = testOwner
	}
	withListPage(t, 2)
	var pg pages
	stop := pg.watch(v)
	inner := *v.tap.Load()
	var ended sync.Once
	var tap tapFunc = func(r *http.Request, call, answer []byte) {
		inner(r, call, answer)
		if bytes.Contains(call, []byte("<RetrievePropertiesEx")) && tokenRE.Match(answer) {
			ended.Do(func() { control{v}.endSessions(context.WithoutCancel(r.Context())) })
		}
	}
	v.tap.Store(&tap)
	_, err := p.ListByTag(context.Background(), contract.LabelManaged, testOwner)
	stop()
	pg.check(t)
	switch {
	case err == nil:
		t.Fatal("ListByTag whose session ended between pages = nil error, want the list failed whole")
	case errors.Is(err, contract.ErrNotFound), errors.Is(err, contract.ErrPermanent), errors.Is(err, contract.ErrQuota):
		t.Errorf("ListByTag whose session ended between pages = %v (class %v), want transient", err, contract.ClassOf(err))
	}
	if got := listed(t, p, contract.LabelManaged, testOwner); !maps.Equal(got, want) {
		t.Errorf("the next ListByTag = %v, want %v", got, want)
	}
}

// TestPartialReadFails: a mark vCenter could not read (missingSet:
// SecurityError or SystemError, API reference MissingProperty.fault)
// fails the read with its fault; vcsim never answers so, hence the answer
// built here. InvalidProperty (vcsim's for a property under an unset
// parent) reads as unset.
func TestPartialReadFails(t *testing.T) {
	vm := types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-1"}
	uid := markPaths([]string{markUID})[0]
	content := func(f types.BaseMethodFault) []types.ObjectContent {
		return []types.ObjectContent{{
			Obj: vm,
			PropSet: []types.DynamicProperty{
				{Name: "name", Val: "p1"},
				{Name: markPaths([]string{markManaged})[0], Val: types.OptionValue{Key: markManaged, Value: testOwner}},
			},
			MissingSet: []types.MissingProperty{{Path: uid, Fault: types.LocalizedMethodFault{Fault: f, LocalizedMessage: "denied"}}},
		}}
	}
	if vms, err := decodeVMs(content(&types.NoPermission{PrivilegeId: "System.Read"})); err == nil {
		t.Errorf("a read with %s missing for NoPermission read %d VMs and no error, want an error", uid, len(vms))
	} else if !errors.Is(classify(err), contract.ErrPermanent) {
		t.Errorf("a read with %s missing for NoPermission: %v, want it classified Permanent", uid, err)
	}
	vms, err := decodeVMs(content(&types.InvalidProperty{Name: uid}))
	if err != nil || len(vms) != 1 {
		t.Fatalf("a read with %s missing as InvalidProperty = %v, %v, want the VM", uid, vms, err)
	}
	if e := extra(vms[0].VirtualMachine); e[markManaged] != testOwner || e[markUID] != "" || vms[0].Name != "p1" {
		t.Errorf("the VM read = %s, marks %v, want p1 with its owner and no UID", vms[0].Name, e)
	}
}

// leftovers is the control's account of what a list leaves on vCenter
// for its session: a container view lives until DestroyView or the
// session's end (API reference, vim.view.View: "A view exists until you
// terminate it by calling the DestroyView method, or until the end of
// the session",
// https://developer.broadcom.com/xapis/vsphere-web-services-api/8.0U3/vim.view.View.html),
// and a retrieval's remaining pages until its token is continued to the
// end or cancelled (API reference, PropertyCollector.CancelRetrievePropertiesEx:
// "Discards remaining results from a retrieval started by
// RetrievePropertiesEx"). The operator keeps one session for its life, so
// either left by every sweep grows vCenter's memory until a restart. The
// provider keeps one view per region's folder for the session
// (folderView): that many, made once, and no more.
// vcsim keeps every token in one book forever and implements no
// CancelRetrievePropertiesEx, so the control counts the calls instead.
type leftovers struct {
	mu     sync.Mutex
	views  map[string]bool // created, not destroyed
	tokens map[string]bool // issued, neither continued nor cancelled
	// created and issued count what the tap saw made, so a check never
	// passes on answers it could not read.
	created, issued int
}

var (
	viewRE      = regexp.MustCompile(`<returnval type="ContainerView">([^<]+)</returnval>`)
	destroyRE   = regexp.MustCompile(`<DestroyView[^>]*>\s*<_this type="ContainerView">([^<]+)</_this>`)
	continuedRE = regexp.MustCompile(`<ContinueRetrievePropertiesEx[^>]*>[\s\S]*<token>([^<]+)</token>`)
	cancelledRE = regexp.MustCompile(`<CancelRetrievePropertiesEx[^>]*>[\s\S]*<token>([^<]+)</token>`)
)

func (l *leftovers) watch(v *vcsim) (stop func()) {
	l.views, l.tokens, l.created, l.issued = map[string]bool{}, map[string]bool{}, 0, 0
	var tap tapFunc = func(_ *http.Request, call, answer []byte) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if m := viewRE.FindSubmatch(answer); m != nil && bytes.Contains(call, []byte("<CreateContainerView")) {
			l.views[string(m[1])] = true
			l.created++
		}
		if m := destroyRE.FindSubmatch(call); m != nil {
			delete(l.views, string(m[1]))
		}
		// A Continue vCenter refused read nothing: its token still
		// holds the pages. A Cancel discards them (vcsim answers it
		// with NotImplemented).
		if m := continuedRE.FindSubmatch(call); m != nil && !bytes.Contains(answer, []byte("Fault>")) {
			delete(l.tokens, string(m[1]))
		}
		if m := cancelledRE.FindSubmatch(call); m != nil {
			delete(l.tokens, string(m[1]))
		}
		if m := tokenRE.FindSubmatch(answer); m != nil && bytes.Contains(call, []byte("RetrievePropertiesEx")) {
			l.tokens[string(m[1])] = true
			l.issued++
		}
	}
	v.tap.Store(&tap)
	return func() { v.tap.Store(nil) }
}

// check fails if more than kept views were made and left, or a retrieval
// was left.
func (l *leftovers) check(t *testing.T, what string, kept int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.issued == 0 {
		t.Fatalf("%s: the tap saw no token issued; it cannot read the calls", what)
	}
	if len(l.views) > kept {
		t.Errorf("%s left %d container views on vCenter, want at most %d: %v", what, len(l.views), kept, slices.Collect(maps.Keys(l.views)))
	}
	if len(l.tokens) > 0 {
		t.Errorf("%s left %d retrievals neither read to the end nor cancelled: %v", what, len(l.tokens), slices.Collect(maps.Keys(l.tokens)))
	}
}

// TestListLeavesNothingOnVCenter: lists make one view per region's folder
// for the session and reuse it, and one that stops between pages cancels
// the retrieval it leaves (leftovers).
func TestListLeavesNothingOnVCenter(t *testing.T) {
	v := startVcsim(t)
	p := v.provider(t)
	for _, name := range []string{"left-a", "left-b", "left-c"} {
		createVM(t, p, name, "uid-"+name, testOwner)
	}
	withListPage(t, 2)

	var l leftovers
	stop := l.watch(v)
	if got := listed(t, p, contract.LabelManaged, testOwner); len(got) != 3 {
		t.Fatalf("ListByTag = %v, want the 3 VMs", got)
	}
	stop()
	regions := len(p.cfg.Regions)
	if l.created != regions {
		t.Errorf("the session's first list made %d container views, want one per region (%d)", l.created, regions)
	}
	l.check(t, "a list read to the end", regions)
	stop = l.watch(v)
	listed(t, p, contract.LabelManaged, testOwner)
	stop()
	if l.created != 0 {
		t.Errorf("a second list made %d container views, want none: the folders' views are the session's", l.created)
	}
	l.check(t, "a second list", 0)

	// A page that fails while the session lives: the retrieval's token
	// stays good on vCenter.
	v.model.Service.AddFaultRule(&simulator.FaultInjectionRule{
		MethodName: "ContinueRetrievePropertiesEx", ObjectType: "*", ObjectName: "*", FaultType: simulator.FaultTypeCustom,
		Fault: &types.SystemError{Reason: "injected"}, MaxCount: 1, Enabled: true, Probability: 1,
	})
	stop = l.watch(v)
	_, err := p.ListByTag(context.Background(), contract.LabelManaged, testOwner)
	stop()
	if err == nil {
		t.Fatal("ListByTag with a page refused = nil error, want the list failed whole")
	}
	l.check(t, "a list cut off between pages", 0)
}

// TestDestroyUnderWayIsQueuedOrRunning: a VM is being destroyed while a
// destroy task in its recentTask is queued or running (TaskInfo.state:
// queued, running, success, error); a destroy that failed or finished
// is not one under way, and another task is none. vcsim runs a destroy
// at once, so the answers are built here.
func TestDestroyUnderWayIsQueuedOrRunning(t *testing.T) {
	vm := types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-1"}
	task := types.ManagedObjectReference{Type: "Task", Value: "task-1"}
	for _, tc := range []struct {
		description string
		state       types.TaskInfoState
		want        bool
	}{
		{destroyTask, types.TaskInfoStateQueued, true},
		{destroyTask, types.TaskInfoStateRunning, true},
		{destroyTask, types.TaskInfoStateError, false},
		{destroyTask, types.TaskInfoStateSuccess, false},
		{"VirtualMachine.powerOff", types.TaskInfoStateRunning, false},
	} {
		vms, err := decodeVMs([]types.ObjectContent{
			{Obj: vm, PropSet: []types.DynamicProperty{
				{Name: "name", Val: "p1"},
				{Name: "recentTask", Val: types.ArrayOfManagedObjectReference{ManagedObjectReference: []types.ManagedObjectReference{task}}},
			}},
			{Obj: task, PropSet: []types.DynamicProperty{
				{Name: "info.descriptionId", Val: tc.description},
				{Name: "info.state", Val: tc.state},
			}},
		})
		if err != nil || len(vms) != 1 {
			t.Fatalf("%s %s: decodeVMs = %v, %v; want the VM", tc.description, tc.state, vms, err)
		}
		if vms[0].destroying != tc.want {
			t.Errorf("a VM whose recent task is %s, %s: destroying = %v, want %v", tc.description, tc.state, vms[0].destroying, tc.want)
		}
	}
}

// TestListNamesOnlyVMsGetFinds: every instance ListByTag returns is one
// Get and Delete find by its providerID. The key is the VM's name in the
// region's folder, and Get and Delete look it up with
// SearchIndex.FindChild, which "only searches the immediate children of
// a managed entity" (API reference, vim.SearchIndex.findChild). A marked
// VM a person moved into a subfolder of the operator's folder would
// otherwise be listed under a providerID that reads as gone: the garbage
// collector's Delete and a finalizer's return nil and leave it running,
// and the finalizer lists it again, for ever.
func TestListNamesOnlyVMsGetFinds(t *testing.T) {
	v := startVcsim(t)
	p := v.provider(t)
	ctx := context.Background()
	kept := createVM(t, p, "kept", "uid-kept", testOwner)
	moved := createVM(t, p, "moved", "uid-moved", testOwner)
	folder, err := find.NewFinder(v.client, true).Folder(ctx, v.cfg.Regions["dc0"].Folder)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := folder.CreateFolder(ctx, "sorted-by-hand")
	if err != nil {
		t.Fatal(err)
	}
	vm, err := (control{v}).vm(ctx, moved.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	task, err := sub.MoveInto(ctx, []types.ManagedObjectReference{vm.Reference()})
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := powerOff(context.Background(), vm); err != nil {
			t.Errorf("removing the moved VM: %v", err)
		}
		if err := destroy(context.Background(), vm); err != nil {
			t.Errorf("removing the moved VM: %v", err)
		}
	})

	got, err := p.ListByTag(ctx, contract.LabelManaged, testOwner)
	if err != nil {
		t.Fatal(err)
	}
	for _, inst := range got {
		if _, err := p.Get(ctx, inst.ProviderID); err != nil {
			t.Errorf("ListByTag listed %s, which Get cannot read: %v", inst.ProviderID, err)
		}
	}
	if len(got) != 1 || got[0].ProviderID != kept.ProviderID {
		t.Errorf("ListByTag = %v, want only %s", got, kept.ProviderID)
	}
}

// TestPartialReadFailsWhateverComesFirst: a mark vCenter could not read
// fails the read even after a property that reads as unset
// (InvalidProperty), and the error names the property and the fault,
// by its message or, without one, by its type.
func TestPartialReadFailsWhateverComesFirst(t *testing.T) {
	vm := types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-1"}
	uid := markPaths([]string{markUID})[0]
	for _, msg := range []string{"denied", ""} {
		_, err := decodeVMs([]types.ObjectContent{{
			Obj:     vm,
			PropSet: []types.DynamicProperty{{Name: "name", Val: "p1"}},
			MissingSet: []types.MissingProperty{
				{Path: "guest.net", Fault: types.LocalizedMethodFault{Fault: &types.InvalidProperty{Name: "guest.net"}}},
				{Path: uid, Fault: types.LocalizedMethodFault{Fault: &types.NoPermission{PrivilegeId: "System.Read"}, LocalizedMessage: msg}},
			},
		}})
		want := msg
		if want == "" {
			want = "NoPermission"
		}
		if err == nil || !strings.Contains(err.Error(), uid) || !strings.Contains(err.Error(), want) {
			t.Errorf("a read with guest.net unset and %s missing for NoPermission (message %q) = %v, want an error naming %s and %s", uid, msg, err, uid, want)
		}
	}
}
