package proxmox

import (
	"context"
	"net/url"
	"testing"
	"time"

	pve "github.com/luthermonson/go-proxmox"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
	"github.com/egress-proxies/egress-proxies-operator/providers/proxmox/pvefake"
)

// TestClassify classifies errors captured from real HTTP round trips: each
// answer is provoked on the fake (whose texts are PVE's, see pvefake's doc
// comment) and comes back through go-proxmox and the provider's transport,
// the path a real node's answers take.
func TestClassify(t *testing.T) {
	f := startFake(t)
	ctx := context.Background()
	api, _, _, err := newRegionClient(testRegion, f.cfg.Regions[testRegion]).client()
	if err != nil {
		t.Fatal(err)
	}
	const src = "pvefake answer through go-proxmox v0.8.2 and the provider's transport; text from "

	var x map[string]any
	missing := api.Get(ctx, vmPath("pve1", 4242)+"/config", &x)

	f.s.FailNext(pvefake.OpClone, 403, "Permission check failed (/vms/9000, VM.Clone)")
	_, _, denied := newVM(api, "pve1", templateVMID).Clone(ctx, &pve.VirtualMachineCloneOptions{NewID: 1001, Name: "denied"})

	f.s.FailNextTask("qmclone", `clone failed: lvcreate 'pve/vm-1002-disk-0' error:   Volume group "pve" has insufficient free space (1023 extents): 2048 required.`)
	full := failedTask(t, api, 1002)
	f.s.FailNextTask("qmclone", "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout")
	lockTimeoutTask := failedTask(t, api, 1003)
	f.s.FailNext(pvefake.OpUpload, 500, "error writing '/var/tmp/pveupload-3f1c' - No space left on device")
	noSpace := api.Post(ctx, "/nodes/pve1/storage/local/upload", map[string]string{"content": "iso"}, &x)

	vmid, err := f.s.CloneVM(templateVMID, "locked")
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := f.s.Lock(vmid, "clone")
	if err != nil {
		t.Fatal(err)
	}
	locked := newVM(api, "pve1", vmid).ConfigSync(ctx, pve.VirtualMachineOption{Name: "cores", Value: 2})
	unlock()
	invalid := newVM(api, "pve1", vmid).ConfigSync(ctx, pve.VirtualMachineOption{Name: "cores", Value: 0})
	unknownKey := newVM(api, "pve1", vmid).ConfigSync(ctx, pve.VirtualMachineOption{Name: "cicustom-nope", Value: "x"})

	f.s.FailNext(pvefake.OpResources, 500, "can't lock file '/var/lock/qemu-server/lock-1000.conf' - got timeout")
	lockTimeout := api.Get(ctx, "/cluster/resources?type=vm", &x)
	f.s.FailNext(pvefake.OpResources, 503, "Service Unavailable")
	unavailable := api.Get(ctx, "/cluster/resources?type=vm", &x)
	f.s.FailNext(pvefake.OpResources, 595, "Connection timed out")
	proxied := api.Get(ctx, "/cluster/resources?type=vm", &x)
	unknownNode := api.Get(ctx, "/nodes/pve9/qemu", &x)
	noStorage := api.Get(ctx, "/nodes/pve1/storage/nope/status", &x)

	// Provoked, not injected: pvefake refuses these as clone_vm does.
	_, _, localToNode := newVM(api, "pve1", templateVMID).Clone(ctx, &pve.VirtualMachineCloneOptions{NewID: 1004, Name: "far", Target: "pve2"})
	_, _, nonShared := newVM(api, "pve1", templateVMID).Clone(ctx, &pve.VirtualMachineCloneOptions{NewID: 1005, Name: "far", Full: pve.IntOrBool(true), Storage: "local-lvm", Target: "pve2"})

	noTask := api.Get(ctx, "/nodes/pve1/tasks/"+url.PathEscape("UPID:pve1:00002000:0000E000:6B0DFE0B:qmclone:9000:egress@pve!operator:")+"/status", &x)

	f.s.RejectToken(true)
	badToken := api.Get(ctx, "/cluster/resources?type=vm", &x)
	f.s.RejectToken(false)

	systemRoots := f.cfg.Regions[testRegion]
	systemRoots.CAFile = ""
	untrusted, _, _, err := newRegionClient(testRegion, systemRoots).client()
	if err != nil {
		t.Fatal(err)
	}
	certificate := untrusted.Get(ctx, "/version", &x)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	cancelledErr := api.Get(cancelled, "/version", &x)

	contracttest.RunClassifyTable(t, classify, []contracttest.ClassifyCase{
		{Name: "missing VM config", Err: missing, Want: contract.ErrNotFound, Source: src + "PVE::AbstractConfig::load_config, captured in ionos-cloud/cluster-api-provider-proxmox#389"},
		{Name: "permission denied", Err: denied, Want: contract.ErrPermanent, Source: src + "PVE::RPCEnvironment::check (403)"},
		{Name: "storage full: clone task", Err: full, Want: contract.ErrQuota, Source: src + "LVM thin pool full, qemu-server clone worker's exit status"},
		{Name: "storage full: upload", Err: noSpace, Want: contract.ErrQuota, Source: src + "ENOSPC while pveproxy spools an upload"},
		{Name: "clone task: storage lock timeout", Err: lockTimeoutTask, Want: nil, Source: src + "task exit status captured in ionos-cloud/cluster-api-provider-proxmox#389"},
		{Name: "locked", Err: locked, Want: nil, Source: src + "PVE::AbstractConfig::check_lock, captured in Corsinvest/cv4pve-autosnap#22"},
		{Name: "config lock timeout", Err: lockTimeout, Want: nil, Source: src + "PVE::Tools::lock_file, captured in Telmate/terraform-provider-proxmox#173"},
		{Name: "invalid parameter", Err: invalid, Want: contract.ErrPermanent, Source: src + "PVE::JSONSchema minimum check (400 Parameter verification failed.)"},
		{Name: "unknown parameter", Err: unknownKey, Want: contract.ErrPermanent, Source: src + "PVE::JSONSchema additionalProperties (400)"},
		{Name: "5xx: 503", Err: unavailable, Want: nil, Source: src + "an overloaded pveproxy (go-proxmox alone returns nil for it)"},
		{Name: "5xx: 595 from a proxied node", Err: proxied, Want: nil, Source: src + "pveproxy's 595 when a node does not answer"},
		{Name: "unknown node", Err: unknownNode, Want: contract.ErrPermanent, Source: src + "pveproxy's node lookup"},
		{Name: "unknown storage", Err: noStorage, Want: contract.ErrPermanent, Source: src + "PVE::Storage storage_config"},
		{Name: "clone to another node, local storage", Err: localToNode, Want: contract.ErrPermanent, Source: src + "qemu-server src/PVE/API2/Qemu.pm clone_vm"},
		{Name: "clone to another node onto non-shared storage", Err: nonShared, Want: contract.ErrPermanent, Source: src + "qemu-server src/PVE/API2/Qemu.pm clone_vm"},
		{Name: "unknown task", Err: noTask, Want: contract.ErrNotFound, Source: src + "pve-manager PVE/API2/Tasks.pm read_task_status (400, upid: no such task)"},
		{Name: "token rejected", Err: badToken, Want: contract.ErrPermanent, Source: src + "PVE::AccessControl::verify_token (401)"},
		{Name: "TLS failure", Err: certificate, Want: contract.ErrPermanent, Source: "crypto/x509 against the fake's self-signed certificate with system roots"},
		{Name: "cancelled ctx", Err: cancelledErr, Want: nil, Source: "context package through net/http"},
	})
}

// failedTask clones the template to vmid and returns the failed task's
// exit status as the provider sees it, waiting on the task by hand.
func failedTask(t *testing.T, api *pve.Client, vmid int) error {
	t.Helper()
	ctx := context.Background()
	_, task, err := newVM(api, "pve1", templateVMID).Clone(ctx, &pve.VirtualMachineCloneOptions{NewID: vmid, Name: "full"})
	if err != nil {
		t.Fatal(err)
	}
	for {
		var st taskStatus
		if err := api.Get(ctx, "/nodes/pve1/tasks/"+string(task.UPID)+"/status", &st); err != nil {
			t.Fatal(err)
		}
		if st.Status == "stopped" {
			if st.ExitStatus == "OK" {
				t.Fatalf("task %s succeeded; a failure was injected", task.UPID)
			}
			return &TaskError{Type: st.Type, UPID: string(task.UPID), ExitStatus: st.ExitStatus}
		}
		time.Sleep(10 * time.Millisecond)
	}
}
