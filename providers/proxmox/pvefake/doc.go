// Package pvefake is a stateful fake of the parts of the Proxmox VE 8 and 9
// HTTP API (/api2/json) the proxmox provider uses, served over TLS by
// net/http/httptest. No Proxmox simulator exists; this fake answers the way
// a PVE node does, so the provider and go-proxmox cannot tell it from one:
// the same paths, JSON shapes, asynchronous tasks with UPIDs, config locks
// and error texts in the HTTP reason phrase. Options.Version picks PVE 8 or
// 9 (default 9): the pinned schema, the privileges and /version.
//
// # The published API schema
//
// Every request is checked against PVE's own API schema before a handler
// runs: pve-docs api-viewer/apidata.js, pinned in schema/ at PVE 9.1.3
// (e5010dc) and 8.4.2 (fa0b4f6, stable-bookworm) with their sha256
// (schema/README.md). internal/schemagen keeps the endpoints the fake serves
// (schema/facts-pve8.json, facts-pve9.json; a test regenerates and
// compares them). A path the schema has not is 501 as before.
//
// Validation (schema.go) follows pve-common src/PVE/JSONSchema.pm:
// check_object (unknown parameters where additionalProperties is 0:
// "property is not defined in schema and the schema does not allow
// additional properties"; aliases remapped), check_prop (in its order:
// "property is missing and it is not optional", check_type's "type check
// ('integer') failed - got '…'" (booleans only 0 or 1), "invalid format -
// …", "value does not match the regex pattern", "value may only be N
// characters long", "value must have a maximum value of N", "value must
// have a minimum value of N", "value '…' does not have a value in the
// enumeration '…'"), add_error (errors on one path joined by a literal
// backslash-n), check_format ("-list" items by PVE::Tools/ParseUtils split_list,
// "-opt"), parse_property_string (drive, net, memory, agent: the default
// key, aliases and keyAlias, "invalid key in comma-separated list
// property: …", the sub-keys checked as "ide2.media", raised as "format
// error" with the sub-errors listed). Errors answer 400 "Parameter
// verification failed." with the "errors" object (PVE::JSONSchema::validate,
// PVE::Exception raise_param_exc). The API viewer names indexed keys
// "ide[n]"; n is bounded by the "(n is 0 to N)" of their description,
// unbounded where it gives none (net, unused, ipconfig, numa, hostpci,
// virtiofs). Named formats ported (formats.go), each from the Perl that
// registers it: pve-vmid, pve-node, pve-storage-id (parse_id), dns-name,
// pve-tag (pve-tag-list), pve-configid (-list), disk-size (parse_size),
// pve-bridge-id, mac-addr, address (address-list: nameserver), and inside
// ipconfig ipv4, ipv6, pve-ipv4-config, pve-ipv6-config (JSONSchema.pm, the
// address patterns of ParseUtils.pm); pve-qm-ipconfig, a property string
// whose keys the API viewer does not carry, ported from qemu-server
// $ipconfig_fmt (QemuServer/Network.pm; QemuServer.pm in 8.4) with
// check_object's "missing property required by '…'" for a gateway without
// its address (hashFormats); pve-volume-id, pve-storage-content
// (pve-storage src/PVE/Storage/Plugin.pm parse_volume_id, verify_content);
// pve-volume-id-or-qm-path, pve-volume-id-or-absolute-path (qemu-server
// src/PVE/QemuServer.pm); pve-poolid (pve-access-control
// src/PVE/AccessControl.pm verify_poolname). The others the endpoints use
// are accepted unchecked, listed in uncheckedFormats (CIDR,
// pve-cpuset, pve-hotplug-features, pve-qemu-sev-fmt, pve-qemu-tdx-fmt,
// pve-qm-boot, pve-qm-bootdisk, pve-qm-cicustom, pve-qm-hostpci,
// pve-qm-ide, pve-qm-rng, pve-qm-smbios1,
// pve-qm-watchdog, pve-startup-order, pve-task-status-type (the task
// list's statusfilter), pve-vm-cpu-conf, storage-pair,
// urlencoded): nothing the provider or the tests send reaches them.
//
// # Permissions
//
// Options.ACL is the token's ACL (path, privileges, propagate); nil is
// every privilege on /. It resolves as pve-access-control
// src/PVE/AccessControl.pm roles does: from / down to the path, the
// entries of the most specific path that has any (propagating ones above
// the path, all on it) replace what was inherited. A privilege-separated
// token's privileges are the intersection with its user's
// (src/PVE/RPCEnvironment.pm permissions); the fake models the token's
// own ACL only, and no pools. Privileges per version: AccessControl.pm
// $privgroups, PVE 8 at stable-bookworm, PVE 9 at master (commit 922f710
// added VM.GuestAgent.*, 0706945 dropped VM.Monitor, 5f7544f added
// VM.Replicate); a privilege the version does not know is ignored, as
// parse_user_config does ("ignore invalid privilege").
//
// The schema's permissions are evaluated as RPCEnvironment.pm
// check_api2_permissions and exec_api2_perm_check do ("user: all" passes
// to the handler; and, or, perm with any and require_param; {param} by
// PVE::Tools::template_replace), check and check_any failing with
// PVE::Exception raise_perm_exc: 403 "Permission check failed (<path>,
// <priv>)", "(<path>, <a>|<b>)" for any, bare for a failed or
// (userid-param, userid-group and perm-modify are not modelled: no
// endpoint the fake serves uses them). The
// handlers' own checks (codechecks.go), each after the schema's:
//
//   - clone: qemu-server src/PVE/API2/Qemu.pm clone_vm, schema check VM.Clone
//     on /vms/{vmid} and VM.Allocate on /vms/{newid} or /pool/{pool};
//     $check_storage_access_clone: Datastore.AllocateSpace on the storage of
//     each of the source's disks, or on the target storage when given, for
//     linked clones too; Sys.Console on / for a physical CD-ROM;
//     PVE::QemuServer check_bridge_access → pve-guest-common
//     src/PVE/GuestHelpers.pm check_vnet_access: SDN.Use on
//     /sdn/zones/localnetwork/<bridge> (/<tag> with a VLAN tag);
//   - config: update_vm, schema check any VM.Config.*; skiplock is root's
//     only ("Only root may use this option."); $check_vm_modify_config_perm
//     per key and deleted key: $cpuoptions VM.Config.CPU, $memoryoptions
//     VM.Config.Memory, $hwtypeoptions VM.Config.HWType, $generaloptions
//     VM.Config.Options (startup also Sys.Modify on /), $vmpoweroptions
//     VM.PowerMgmt, $diskoptions VM.Config.Disk, net VM.Config.Network,
//     cloud-init keys VM.Config.Cloudinit or VM.Config.Network, anything
//     else "only root can set '<key>' config"; a drive: $check_drive_perms
//     (VM.Config.CDROM for a CD-ROM, else VM.Config.Disk) and
//     $check_storage_access → pve-storage src/PVE/Storage.pm
//     check_volume_access (Datastore.Allocate, or for an iso/vztmpl/import
//     volume Datastore.AllocateSpace or Datastore.Audit on its storage); a
//     NIC: check_bridge_access; tags: GuestHelpers.pm assert_tag_permissions
//     (VM.Config.Options; the user-tag-access modes, tags.go, ask the ACL
//     for Sys.Modify on /);
//   - destroy: destroy_vm, schema check VM.Allocate on /vms/{vmid};
//   - power: vm_start, vm_stop, vm_shutdown, schema check VM.PowerMgmt;
//   - agent reads: qemu-server src/PVE/API2/Qemu/Agent.pm, schema check
//     VM.Monitor on PVE 8, VM.GuestAgent.Audit or VM.GuestAgent.Unrestricted
//     on PVE 9;
//   - content delete: pve-storage src/PVE/API2/Storage/Content.pm delete
//     ("user: all"): Datastore.Allocate on the storage (a backup volume:
//     Datastore.AllocateSpace and VM.Backup on its VM); upload: Status.pm
//     upload, schema check Datastore.AllocateTemplate; content listing:
//     Content.pm index, schema check Datastore.Audit or
//     Datastore.AllocateSpace, each volume kept only if check_volume_access
//     passes; storage list: Status.pm index keeps the storages with
//     Datastore.Audit or Datastore.AllocateSpace;
//   - /cluster/resources: pve-manager PVE/API2/Cluster.pm resources ("user:
//     all"): a guest only with VM.Audit on /vms/<vmid>, a storage only with
//     Datastore.Audit, a node without Sys.Audit without its statistics; a
//     node's VM list (Qemu.pm vmlist): VM.Audit;
//   - task status and log: pve-manager PVE/API2/Tasks.pm read_task_status,
//     read_task_log: the token that started the task reads it; anyone else
//     needs Sys.Audit on /nodes/<node>.
//
// Requirements and Role (role.go) read the same facts without a token: the
// provider's tests generate the guide's role from them.
//
// # Sources
//
// Shapes follow the PVE API viewer
// (https://pve.proxmox.com/pve-docs/api-viewer/) for:
// /version, /cluster/nextid, /cluster/resources, /nodes/{node}/status,
// /nodes/{node}/qemu, /nodes/{node}/qemu/{vmid}/{config,clone,status/current,
// status/start,status/stop,status/shutdown}, DELETE /nodes/{node}/qemu/{vmid},
// /nodes/{node}/qemu/{vmid}/agent/network-get-interfaces,
// /nodes/{node}/storage[/{storage}/{status,content,upload}],
// DELETE /nodes/{node}/storage/{storage}/content/{volume} and
// /nodes/{node}/tasks[/{upid}/{status,log}]. The qm(1) manual
// (https://pve.proxmox.com/pve-docs/qm.1.html) gives the config keys and the
// lock values (backup, clone, create, migrate, rollback, snapshot,
// snapshot-delete, suspended, suspending); tags are checked by the schema's
// pve-tag-list and stored as tag access below says.
//
// Error texts are PVE's own, each from its Perl source (pve-http-server
// src/PVE/APIServer/AnyEvent.pm writes the exception message as the reason
// phrase with body `{"data":null}`; parameter errors are 400 "Parameter
// verification failed." with an "errors" object, pve-common
// src/PVE/Exception.pm raise_param_exc). Repositories are Proxmox's;
// "8.4" is the stable-bookworm branch, "9.1" master; a text is the same in
// both unless it says otherwise.
//
//   - 500 Configuration file 'nodes/<node>/qemu-server/<vmid>.conf' does not exist
//     (pve-guest-common src/PVE/AbstractConfig.pm load_config)
//   - 500 VM is locked (<lock>) (AbstractConfig.pm check_lock)
//   - 500 can't lock file '/var/lock/qemu-server/lock-<vmid>.conf' - got timeout
//     (pve-common src/PVE/Tools.pm lock_file)
//   - 500 unable to create VM <vmid>: config file already exists, and the
//     other clone_vm refusals below (qemu-server src/PVE/API2/Qemu.pm)
//   - 400 with errors {"vmid": "VM <vmid> already exists"} from /cluster/nextid?vmid=
//     (pve-manager PVE/API2/Cluster.pm nextid)
//   - 403 Permission check failed (<path>, <privilege>) (pve-access-control
//     src/PVE/RPCEnvironment.pm check → pve-common raise_perm_exc;
//     see Permissions above)
//   - 401 invalid token value! (pve-access-control src/PVE/AccessControl.pm
//     verify_token); pveproxy delays every 401 by 3 s (pve-http-server
//     AnyEvent.pm handle_api2_request: "always delay unauthorized calls by 3
//     seconds"), the fake does not
//   - 500 you can't start a vm if it's a template, 500 VM <vmid> already
//     running (qemu-server src/PVE/QemuServer.pm vm_start)
//   - 500 VM <vmid> is running - destroy failed, 500 can't remove VM <vmid> -
//     protection mode enabled (qemu-server API2/Qemu.pm destroy_vm's early
//     checks, AbstractConfig.pm check_protection)
//   - 500 detected modified configuration - file changed by other user? Try
//     again. (pve-common Tools.pm assert_if_modified)
//   - 500 hostname lookup '<node>' failed - failed to get address info for:
//     <node>: Name or service not known (pve-common src/PVE/Network.pm
//     get_ip_from_hostname, Tools.pm; pveproxy resolving an unknown node)
//   - 400 {upid: "unable to parse worker upid" | "no such task"} (pve-manager
//     PVE/API2/Tasks.pm read_task_status, read_task_log; the task file is
//     the serving node's)
//   - 501 Method '<method> <path>' not implemented (AnyEvent.pm)
//   - task exit status "clone failed: lvcreate 'pve/vm-<vmid>-disk-0' error:
//     Volume group "pve" has insufficient free space (...)": the "clone
//     failed: " prefix is clone_vm's worker; the lvcreate text was captured
//     in khanh-ph/proxmox-kubernetes#71 (an LVM message, not PVE's).
//
// # Behaviour from source
//
// Task exit statuses. fork_worker ends a task's log with "TASK OK", "TASK
// WARNINGS: <n>" when the worker called warn n times, or "TASK ERROR:
// <message>" with the message's newlines made spaces; read_status returns
// what follows "TASK " (pve-common src/PVE/RESTEnvironment.pm fork_worker,
// src/PVE/UPID.pm read_status; 8.4: src/PVE/Tools.pm upid_read_status),
// and status_is_error (8.4: Tools.pm upid_status_is_error) calls only OK
// and WARNINGS: <n> success. The fake applies a task's effect for both
// (FailNextTask, WarnNextTask).
//
// Names. qemu-server's vmstatus reports a VM without a name in its config
// as "VM <vmid>" (src/PVE/QemuServer.pm vmstatus), which status/current
// returns; /cluster/resources takes the name from pvestatd's RRD data,
// filled from the same vmstatus (pve-manager PVE/Service/pvestatd.pm
// update_qemu_status, PVE/API2Tools.pm extract_vm_stats), so it shows "VM
// <vmid>" too once pvestatd saw the VMID, and before that no name and
// status "unknown" (HideNames plays that); lock and tags come from the
// config at once (Cluster.pm resources, get_guest_config_properties).
//
// Containers. /cluster/resources?type=vm lists LXC containers with the
// VMs (Cluster.pm resources: every guest of the vmlist, type "lxc"), and
// a container's VMID is taken for a VM too: /cluster/nextid skips it, and
// a clone onto it is refused before the worker, "CT <vmid> already exists
// on node '<n>'" (pve-cluster PVE/Cluster.pm check_vmid_unused, called by
// clone_vm). AddContainer puts one; the fake serves no LXC endpoint.
//
// Clone (qemu-server API2/Qemu.pm clone_vm). Before the worker forks,
// $load_and_check answers the request, in this order: "no such cluster
// node '<n>'" (pve-cluster Cluster.pm check_node_exists; a target equal to
// the serving node is dropped); a storage that does not exist (pve-storage
// Storage.pm storage_config), does not hold images (400 {storage: "storage
// '<s>' does not support vm images"}) or, with a target, is not shared
// ("can't clone to non-shared storage '<s>'"); the source's lock; "parameter
// 'storage' not allowed for linked clones"; "can't clone VM to node '<n>'
// (VM uses local storage)" when any volume of the source — disk or CD-ROM
// image, full clone or linked — is on a storage without `shared`
// ($check_storage_access_clone); "unable to create VM <id>: config file
// already exists" when the serving node has the config. The worker writes
// a temporary config "# qmclone temporary file\nlock: clone\n" on the
// serving node (so status/current names it "VM <id>"), writes the full
// config with name, description and still `lock: clone` after each disk
// (ClonesPastDisks plays that step while a task is held), drops the lock at the end, and only
// then renames the config to the target node. A VMID taken on another
// node is not seen by the early check: pmxcfs refuses the temporary
// config's rename (pve-cluster src/pmxcfs/memdb.c memdb_rename: EEXIST), so
// the task ends "close (rename) atomic file
// '/etc/pve/nodes/<node>/qemu-server/<id>.conf' failed: File exists"
// (pve-common src/PVE/File.pm file_set_contents), without clone_vm's
// "clone failed: " prefix. A failed clone frees its disks and removes the
// config. A template's disk is on Template.Storage.
//
// Guest agent (qemu-server src/PVE/QemuServer/Agent.pm
// assert_agent_available, 8.4 and 9.1): "No QEMU guest agent configured"
// when the config has no `agent` key (`agent: 0` is defined and passes),
// then "VM <vmid> is not running", then "QEMU guest agent is not running"
// when guest-ping gets no answer within 3 s (qga_check_running) — no agent
// in the guest, a guest still booting, a paused VM, an agent disabled. An
// agent that answers the ping but not the command fails after QMPClient's
// default 5 s: "VM <vmid> qmp command 'guest-network-get-interfaces' failed
// - got timeout" (8.4; 9.1 names the peer "qga": src/PVE/QMPClient.pm cmd,
// mux_timeout). 9.1 requires VM.GuestAgent.Audit (or
// VM.GuestAgent.Unrestricted) for the read (src/PVE/API2/Qemu/Agent.pm).
// HangAgent plays either hang; the fake answers at once.
//
// Tag access (pve-guest-common src/PVE/GuestHelpers.pm
// assert_tag_permissions, get_allowed_tags, get_unique_tags; pve-cluster
// src/PVE/DataCenterConfig.pm user-tag-access, registered-tags,
// tag-style; qemu-server update_vm_api). Every tag a config write adds or
// removes must be allowed to a user without Sys.Modify on /: any under
// user-allow "free" (the default), user-allow-list under "list", the list
// and every tag some guest already carries under "existing", none under
// "none"; registered-tags never. A refused tag is 403 "Permission check
// failed (/, Sys.Modify for modifying tag '<tag>')". Tags are stored
// lower-cased, sorted and unique unless tag-style says case-sensitive
// (get_unique_tags). PVE checks and writes a config option by option into
// the pending section, so a refused tag can leave earlier options pending;
// the fake refuses the whole write. A clone copies the template's tags
// unchecked. Sys.Modify on / comes from the token's ACL (Options.ACL;
// TagAccess.SysModify stands for it when there is no ACL).
//
// Destroy (qemu-server API2/Qemu.pm destroy_vm, QemuServer.pm destroy_vm).
// skiplock is root@pam's alone (400 "Only root may use this option.");
// protection and a running VM refuse the request; the lock is checked in
// the qmdestroy worker, so a locked VM fails the task. The worker frees
// the disks the VM owns (never CD-ROM images: a seed ISO stays) with the
// config in place, then writes `lock: destroyed` as the whole config and
// removes it last; the fake shows `lock: destroyed` for the whole task. A
// disk that cannot be freed is a warning (the task ends WARNINGS: <n>).
// With destroy-unreferenced-disks=1, destroy_vm then lists the VMID's
// disks on every enabled storage (vdisk_list with no storage) outside any
// eval: a storage with images content that is Offline fails the task
// "storage '<name>' is not online" (pve-storage Storage.pm
// activate_storage) and the config stays; the fake leaves the VM as it
// was. An Offline storage also refuses its content and upload calls with
// that error, and shows active 0 in the storage index.
//
// Storage (pve-storage src/PVE/API2/Storage/Status.pm upload,
// API2/Storage/Content.pm index and delete, src/PVE/Storage.pm). Upload
// takes content iso, vztmpl or import; a storage without a path (lvm,
// lvmthin, zfspool, rbd) is refused ("can't upload to storage type
// '<type>'"); the file name is normalized, not refused (path dropped,
// other characters than [a-zA-Z0-9_.-] become '_':
// normalize_content_filename); the extension is checked case-insensitively
// (ISO_EXT_RE_0: .iso, .img); then the storage's content types; the file
// lands through an imgcopy task without an ID and replaces one of the same
// name; a full storage fails the task with "import failed: cp: error
// writing '<path>': No space left on device" (pve-common Cmd.pm run_command
// with errmsg). The imgcopy task's log carries what the worker prints
// before its copy (starting file import from, target node, target file,
// file size, command), so a running one names the file it writes; the
// worker runs to its end whatever becomes of the connection (fork_worker;
// DropNextAnswer with HoldTasks plays an answer lost while it copies).
// Content listing filters by content (and vmid) and returns
// volid, content, format, size and ctime. Delete runs vdisk_free in an
// imgdel task whose ID is the storage ID ("<owner>@<storage>" for a VM's
// volume); a file already gone is a warning, "disk image '<path>' does not
// exist" (Storage/Plugin.pm free_image), so the task ends WARNINGS: 1.
//
// UPIDs have PVE's shape,
// UPID:<node>:<pid>:<pstart>:<starttime>:<type>:<id>:<user>:, all hex
// (pve-common src/PVE/UPID.pm encode). The task list (pve-manager
// PVE/API2/Tasks.pm node_tasks) shows a token its own tasks only, all of
// them with Sys.Audit on the node; source active lists the running ones
// (status RUNNING), archive (the default) the ended ones; typefilter,
// userfilter, vmid, start and limit filter as node_tasks does, statusfilter,
// since and until are not modelled.
//
// No source was found for: the sizes the fake reports (maxdisk, maxmem of
// a listed VM are plausible values, not computed as PVE does), the
// pvestatd delay HideNames stands for (pvestatd.pm's $updatetime is 10 s;
// the fake has no clock), and the /version and node
// status values (shapes from the API viewer, values made up).
//
// Clone's format and pool (qemu-server src/PVE/API2/Qemu.pm clone_vm,
// the same in 8.4 and 9.1): `format` with a linked clone is refused
// ("parameter 'format' not allowed for linked clones", 500, before the
// fork); a `pool` that does not exist is refused before the fork by
// RPCEnvironment::check_pool_exist (pve-access-control), whose
// raise_perm_exc (pve-common Exception.pm) answers 403 "Permission check
// failed (pool '<pool>' does not exist)"; the worker's last step is
// add_vm_to_pool, and /cluster/resources lists the VM's pool
// (pve-manager PVE/API2/Cluster.pm resources, from user.cfg). A clone gets
// a new MAC on every netN ("always change MAC! address"). Storage status
// reports storage.cfg's shared flag (pve-storage src/PVE/Storage.pm
// storage_info, API2/Storage/Status.pm read_status).
//
// Cloud-init settings (ipconfig[n], nameserver, searchdomain, cicustom, …)
// are stored as written and render nothing: qemu-server generates a
// cloud-init image only for a drive whose volume is named
// vm-<vmid>-cloudinit (src/PVE/QemuServer/Cloudinit.pm
// generate_cloudinit_config), which the fake has not; the guest reads the
// seed ISO the provider attaches. A stopped VM's config write takes effect
// at once, as update_vm applies the pending changes of a VM that does not
// run (vmconfig_apply_pending; a running one's are hotplugged or stay
// pending, which the fake does not model: the provider writes the config
// before the first start).
//
// The control methods (Stall, FailNext, FailNextTask, WarnNextTask,
// DropNextClone, DropNextAnswer, CutCall, FailCall, HoldTasks, ClonesPastDisks, Lock, BeginDestroy, ReportIP,
// SetQMPStatus, HangAgent, SetTagAccess, RejectToken, CloneVMTo, RemoveVM,
// SetConfig, Reset) and the readers (CloneRequests, Pool, Config, Node,
// Volume, Inventory) are for tests: they play the
// backend's own faults, the guest and a person at the web UI. A cut call
// answers as pveproxy does when the node it forwards a call to is lost:
// 595 or 596 with the system error as the reason (see CutCall).
package pvefake
