// Package pvefake is a stateful fake of the parts of the Proxmox VE 8 HTTP
// API (/api2/json) the proxmox provider uses, served over TLS by
// net/http/httptest. No Proxmox simulator exists; this fake answers the way
// a PVE 8 node does, so the provider and go-proxmox cannot tell it from one:
// the same paths, JSON shapes, asynchronous tasks with UPIDs, config locks
// and error texts in the HTTP reason phrase.
//
// # Sources
//
// Shapes and parameters follow the PVE API viewer
// (https://pve.proxmox.com/pve-docs/api-viewer/, PVE 8.2) for:
// /version, /cluster/nextid, /cluster/resources, /nodes/{node}/status,
// /nodes/{node}/qemu, /nodes/{node}/qemu/{vmid}/{config,clone,status/current,
// status/start,status/stop,status/shutdown}, DELETE /nodes/{node}/qemu/{vmid},
// /nodes/{node}/qemu/{vmid}/agent/network-get-interfaces,
// /nodes/{node}/storage[/{storage}/{status,content,upload}],
// DELETE /nodes/{node}/storage/{storage}/content/{volume} and
// /nodes/{node}/tasks/{upid}/{status,log}. The qm(1) manual
// (https://pve.proxmox.com/pve-docs/qm.1.html) gives the config keys and the
// lock values (backup, clone, create, migrate, rollback, snapshot,
// snapshot-delete, suspended, suspending); tags follow the pve-tag-list
// format of pve-common's JSONSchema.pm (`[a-z0-9_][a-z0-9_\-+.]*`,
// case-insensitive, stored sorted and unique, `;`-separated).
//
// Error texts are PVE's own, from its Perl sources (pve-http-server
// AnyEvent.pm writes the exception message as the reason phrase with body
// `{"data":null}`; parameter errors are 400 "Parameter verification
// failed." with an "errors" object) and from responses users captured:
//
//   - 500 Configuration file 'nodes/<node>/qemu-server/<vmid>.conf' does not exist
//     (PVE::AbstractConfig::load_config; captured in
//     ionos-cloud/cluster-api-provider-proxmox#389)
//   - 500 VM is locked (<lock>) (PVE::AbstractConfig::check_lock; captured in
//     Corsinvest/cv4pve-autosnap#22)
//   - 500 can't lock file '/var/lock/qemu-server/lock-<vmid>.conf' - got timeout
//     (PVE::Tools::lock_file; captured in Telmate/terraform-provider-proxmox#173)
//   - 500 VM <vmid> already exists on node '<node>' (PVE::Cluster::check_vmid_unused)
//   - 400 with errors {"vmid": "VM <vmid> already exists"} from /cluster/nextid?vmid=
//     (PVE::API2::Cluster nextid; go-proxmox's CheckID matches this text)
//   - 403 Permission check failed (<path>, <privilege>) (PVE::RPCEnvironment::check)
//   - 401 invalid token value! (PVE::AccessControl::verify_token); real PVE
//     delays every 401 by 3 s, the fake does not
//   - 500 QEMU guest agent is not running, 500 No QEMU guest agent configured,
//     500 VM <vmid> is not running (PVE::API2::Qemu::Agent; go-proxmox's
//     WaitForAgent matches the first)
//   - 500 VM <vmid> is running - destroy failed (PVE::API2::Qemu destroy_vm)
//   - task exit status "clone failed: lvcreate 'pve/vm-<vmid>-disk-0' error:
//     Volume group "pve" has insufficient free space (...)" (a full LVM
//     thin pool; the "clone failed: " prefix is qemu-server's clone worker,
//     seen in khanh-ph/proxmox-kubernetes#71).
//
// Lifecycle facts the fake keeps: a clone first writes a temporary config
// holding only `lock: clone` (no name, no tags) and fills it when its
// qmclone task ends; a failed clone removes the new VM. Destroy replaces the
// config with `lock: destroyed` while its qmdestroy task runs, then removes
// it. Start, stop and shutdown are qmstart/qmstop/qmshutdown tasks. The
// guest agent answers only while the VM runs and after the guest "booted"
// (ReportIP). Uploads go through an imgcopy task, content deletes through
// imgdel. UPIDs have PVE's shape,
// UPID:<node>:<pid>:<pstart>:<starttime>:<type>:<id>:<user>:, all hex.
//
// Where this fake is an assumption rather than a citation, its comment says
// so. The control methods (Stall, FailNext, FailNextTask, DropNextClone,
// CutCall, HoldTasks, Lock, BeginDestroy, ReportIP, SetQMPStatus,
// RejectToken, CloneVMTo, RemoveVM, Reset) are for tests: they play the
// backend's own faults, the guest and a person at the web UI. A cut call
// answers as pveproxy does when the node it forwards a call to is lost:
// 595 or 596 with the system error as the reason (see CutCall).
package pvefake
