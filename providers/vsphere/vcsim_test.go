package vsphere

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"testing"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

// The test backend is govmomi's own simulator, vcsim, in process, reached
// through a TLS front the test controls: it counts calls and can hold them
// (a hanging vCenter). Everything the harness needs from the backend that
// the provider must not do — the guest reporting an address, faults,
// unmarked VMs — the control below does through vcsim's own API.

const (
	testUser     = "egress-operator"
	testPassword = "sentinel-password-8d2f41"
	testFolder   = "/DC0/vm/egress-proxies"
	templateName = "DC0_C0_RP0_VM0"
)

// vcsim is one simulator behind the front.
type vcsim struct {
	model    *simulator.Model
	front    *httptest.Server
	calls    atomic.Int64
	gate     contracttest.Gate
	rejected atomic.Bool
	cutClone atomic.Bool   // FailAfterCreate
	client   *vim25.Client // the control's own session, straight to vcsim
	cfg      Config
}

func startVcsim(t *testing.T) *vcsim {
	t.Helper()
	model := simulator.VPX()
	if err := model.Create(); err != nil {
		t.Fatal(err)
	}
	model.Service.Listen = &url.URL{User: url.UserPassword(testUser, testPassword)}
	v := &vcsim{model: model}
	sm := model.Map().SessionManager()
	sm.ValidLogin = func(req *types.Login) bool {
		return !v.rejected.Load() && req.UserName == testUser && req.Password == testPassword
	}
	server := model.Service.NewServer()
	t.Cleanup(func() { server.Close(); model.Remove() })

	backend, _ := url.Parse(server.URL.String())
	backend.User = nil
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(&url.URL{Scheme: backend.Scheme, Host: backend.Host}) },
		// Calls the test cancels on purpose are not news.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	v.front = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v.calls.Add(1)
		if v.gate.Pass(r.Context()) != nil {
			return
		}
		if v.cutClone.Load() && v.cutsClone(proxy, r) {
			panic(http.ErrAbortHandler)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(v.front.Close)

	ctx := context.Background()
	c, err := vim25.NewClient(ctx, soapClient(server.URL))
	if err != nil {
		t.Fatal(err)
	}
	if err := loginClient(ctx, c, server.URL); err != nil {
		t.Fatal(err)
	}
	v.client = c
	v.prepare(t)
	v.cfg = v.config(t)
	return v
}

// taskRef finds the task a CloneVM_Task answer returns.
var taskRef = regexp.MustCompile(`<returnval type="Task">([^<]+)</returnval>`)

// cutsClone serves a CloneVM_Task request to vcsim, waits for the clone
// task to finish, and reports true so the answer is dropped; any other
// request it leaves alone.
func (v *vcsim) cutsClone(proxy http.Handler, r *http.Request) bool {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !bytes.Contains(body, []byte("CloneVM_Task")) || !v.cutClone.CompareAndSwap(true, false) {
		return false
	}
	rec := httptest.NewRecorder()
	proxy.ServeHTTP(rec, r)
	if m := taskRef.FindSubmatch(rec.Body.Bytes()); m != nil {
		task := object.NewTask(v.client, types.ManagedObjectReference{Type: "Task", Value: string(m[1])})
		_ = task.Wait(r.Context()) // the clone's own fault, if any, is not the point
	}
	return true
}

// prepare turns a VM into the template and makes the operator's folder.
func (v *vcsim) prepare(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	f := find.NewFinder(v.client, true)
	dc, err := f.Datacenter(ctx, "DC0")
	if err != nil {
		t.Fatal(err)
	}
	f.SetDatacenter(dc)
	vm, err := f.VirtualMachine(ctx, templateName)
	if err != nil {
		t.Fatal(err)
	}
	if task, err := vm.PowerOff(ctx); err != nil || task.Wait(ctx) != nil {
		t.Fatalf("power off the template: %v", err)
	}
	if err := vm.MarkAsTemplate(ctx); err != nil {
		t.Fatal(err)
	}
	folders, err := dc.Folders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := folders.VmFolder.CreateFolder(ctx, "egress-proxies"); err != nil {
		t.Fatal(err)
	}
}

// config writes the credential files and the front's CA and returns the
// provider's config.
func (v *vcsim) config(t *testing.T) Config {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: v.front.Certificate().Raw})
	return Config{
		Server:       v.front.URL + "/sdk",
		UsernameFile: write("username", []byte(testUser+"\n")),
		PasswordFile: write("password", []byte(testPassword+"\n")),
		CAFile:       write("ca.pem", ca),
		Regions: map[string]Region{"dc0": {Datacenter: "DC0", Folder: testFolder, Zones: map[string]Zone{
			"c0": {ResourcePool: "/DC0/host/DC0_C0/Resources", Datastore: "LocalDS_0", Network: "DC0_DVPG0"},
		}}},
		MachineTypes: map[string]MachineType{"small": {CPUs: 1, MemoryMiB: 512}},
		Images:       map[string]string{"debian-12": templateName},
		CallTimeout:  contract.Duration{Duration: 1e9},
	}
}

func (v *vcsim) provider(t *testing.T) *Provider {
	t.Helper()
	p, err := New(v.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// control is the harness's backend control over the simulator.
type control struct{ v *vcsim }

var (
	_ contracttest.GuestReporter      = control{}
	_ contracttest.UnstartedCreator   = control{}
	_ contracttest.UnmarkedCreator    = control{}
	_ contracttest.Staller            = control{}
	_ contracttest.FaultInjector      = control{}
	_ contracttest.CredentialRejecter = control{}
	_ contracttest.UserDataReader     = control{}
	_ contracttest.CallCounter        = control{}
	_ contracttest.Inventory          = control{}
)

// vm finds a VM of the operator's folder by providerID.
func (c control) vm(ctx context.Context, providerID string) (*object.VirtualMachine, error) {
	_, name, err := ids.Parse(providerID)
	if err != nil {
		return nil, err
	}
	return find.NewFinder(c.v.client, true).VirtualMachine(ctx, testFolder+"/"+name)
}

func (c control) reconfigure(ctx context.Context, providerID string, kv ...string) error {
	vm, err := c.vm(ctx, providerID)
	if err != nil {
		return err
	}
	var opts []types.BaseOptionValue
	for i := 0; i < len(kv); i += 2 {
		opts = append(opts, &types.OptionValue{Key: kv[i], Value: kv[i+1]})
	}
	task, err := vm.Reconfigure(ctx, types.VirtualMachineConfigSpec{ExtraConfig: opts})
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}

// ReportIP plays VMware Tools reporting the guest's address, through
// vcsim's SET.guest.* extraConfig; only this test control writes SET.*.
func (c control) ReportIP(ctx context.Context, providerID, ip string) error {
	return c.reconfigure(ctx, providerID, "SET.guest.ipAddress", ip)
}

// CreateUnstarted leaves the VM as an earlier clone powered off without
// markStarted: Create's clone, then powered off and the mark removed.
func (c control) CreateUnstarted(ctx context.Context, req contract.CreateRequest) (string, error) {
	p, err := New(c.v.cfg)
	if err != nil {
		return "", err
	}
	pl, err := p.plan(req)
	if err != nil {
		return "", err
	}
	ref, err := p.clone(ctx, pl, req)
	if err != nil {
		return "", err
	}
	vm := object.NewVirtualMachine(c.v.client, ref)
	task, err := vm.PowerOff(ctx)
	if err != nil {
		return "", err
	}
	if err := task.Wait(ctx); err != nil {
		return "", err
	}
	id := ids.Format(pl.regionName, req.Name)
	return id, c.reconfigure(ctx, id, markStarted, "")
}

// CreateUnmarked clones the template without marks, as a person would.
func (c control) CreateUnmarked(ctx context.Context, name string, _ contract.Placement) (string, error) {
	f := find.NewFinder(c.v.client, true)
	tmpl, err := f.VirtualMachine(ctx, "/DC0/vm/"+templateName)
	if err != nil {
		return "", err
	}
	folder, err := f.Folder(ctx, testFolder)
	if err != nil {
		return "", err
	}
	pool, err := f.ResourcePool(ctx, "/DC0/host/DC0_C0/Resources")
	if err != nil {
		return "", err
	}
	ref := pool.Reference()
	task, err := tmpl.Clone(ctx, folder, name, types.VirtualMachineCloneSpec{Location: types.VirtualMachineRelocateSpec{Pool: &ref}})
	if err != nil {
		return "", err
	}
	return ids.Format("dc0", name), task.Wait(ctx)
}

// Stall holds every call at the front.
func (c control) Stall() func() { return c.v.gate.Stall() }

// methods says which SOAP method serves each provider operation.
var methods = map[contracttest.Op]string{
	contracttest.OpCreate: "CloneVM_Task",
	contracttest.OpGet:    "FindChild",
	contracttest.OpList:   "CreateContainerView",
	contracttest.OpDelete: "Destroy_Task",
}

// faultFor is vSphere's own fault for each class.
func faultFor(class error) types.BaseMethodFault {
	switch {
	case errors.Is(class, contract.ErrNotFound):
		return &types.ManagedObjectNotFound{}
	case errors.Is(class, contract.ErrQuota):
		return &types.InsufficientResourcesFault{}
	case errors.Is(class, contract.ErrPermanent):
		return &types.NoPermission{PrivilegeId: "VirtualMachine.Provisioning.Clone"}
	default:
		return &types.HostCommunication{}
	}
}

// FailNext injects vSphere's fault of the class into the method serving op.
func (c control) FailNext(op contracttest.Op, class error) error {
	c.v.model.Service.AddFaultRule(&simulator.FaultInjectionRule{
		MethodName: methods[op], ObjectType: "*", ObjectName: "*", FaultType: simulator.FaultTypeCustom,
		Fault: faultFor(class), MaxCount: 1, Enabled: true, Probability: 1,
	})
	return nil
}

// FailAfterCreate cuts the connection on the next clone's answer, once
// vcsim has cloned and powered on: the clone stays, the caller sees a
// network error.
func (c control) FailAfterCreate() error {
	c.v.cutClone.Store(true)
	return nil
}

// RejectCredentials makes vcsim refuse logins.
func (c control) RejectCredentials(reject bool) { c.v.rejected.Store(reject) }

// UserData decodes guestinfo.userdata as cloud-init's VMware datasource does.
func (c control) UserData(ctx context.Context, providerID string) ([]byte, error) {
	vm, err := c.vm(ctx, providerID)
	if err != nil {
		return nil, err
	}
	var props mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"config.extraConfig"}, &props); err != nil {
		return nil, err
	}
	e := extra(props)
	if e["guestinfo.userdata.encoding"] != "base64" {
		return nil, fmt.Errorf("guestinfo.userdata.encoding is %q", e["guestinfo.userdata.encoding"])
	}
	return base64.StdEncoding.DecodeString(e["guestinfo.userdata"])
}

// Calls counts SOAP requests through the front.
func (c control) Calls() int { return int(c.v.calls.Load()) }

// Resources lists the VMs of the operator's folder.
func (c control) Resources(ctx context.Context) ([]string, error) {
	vms, err := find.NewFinder(c.v.client, true).VirtualMachineList(ctx, testFolder+"/*")
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	var out []string
	for _, vm := range vms {
		out = append(out, "vm "+vm.InventoryPath)
	}
	return out, nil
}
