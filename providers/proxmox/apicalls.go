package proxmox

// apiCall is one kind of call the provider makes to the PVE API: the
// method, the path as PVE's API schema names it, and every parameter
// (config key, for the config write) it may send, path parameters
// included, with the value it sends as a placeholder of the provider's
// config or of what it reads (<vmid>, <isoStorage>, …). The fake records
// every call it serves; TestEveryCallIsInTheTable fails on one missing
// here. The token role in docs/proxmox-provider.md is generated from
// this table and the pinned schema's checks (role_test.go).
type apiCall struct {
	method, path string
	params       map[string]string
}

// apiCalls are the calls, by the provider's name for them (call tier logs).
var apiCalls = map[string]apiCall{
	"ListVMs": {"GET", "/cluster/resources", map[string]string{"type": "vm"}},
	"GetVM status": {"GET", "/nodes/{node}/qemu/{vmid}/status/current",
		map[string]string{"node": "<node>", "vmid": "<vmid>"}},
	"GetVM config": {"GET", "/nodes/{node}/qemu/{vmid}/config",
		map[string]string{"node": "<node>", "vmid": "<vmid>"}},
	"AgentNetworkInterfaces": {"GET", "/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces",
		map[string]string{"node": "<node>", "vmid": "<vmid>"}},
	// A linked clone: no storage (qemu-server refuses one).
	"CloneVM linked": {"POST", "/nodes/{node}/qemu/{vmid}/clone", map[string]string{
		"node": "<template's node>", "vmid": "<template>", "newid": "<vmid>", "name": "<name>",
		"description": "<marks>", "full": "0", "target": "<node>", "pool": "<pool>"}},
	// fullClone: the zone's storage.
	"CloneVM full": {"POST", "/nodes/{node}/qemu/{vmid}/clone", map[string]string{
		"node": "<template's node>", "vmid": "<template>", "newid": "<vmid>", "name": "<name>",
		"description": "<marks>", "full": "1", "storage": "<storage>", "format": "<format>", "target": "<node>", "pool": "<pool>"}},
	"ConfigureVM": {"PUT", "/nodes/{node}/qemu/{vmid}/config", map[string]string{
		"node": "<node>", "vmid": "<vmid>", "cores": "<cores>", "memory": "<memoryMiB>",
		"ide2": "<isoStorage>:iso/<seed>,media=cdrom", "agent": "1", "tags": "<tags>",
		"net0": "virtio=<MAC>,bridge=<bridge>,tag=<vlan>,mtu=<mtu>,firewall=1",
		// A static address (address.go); without one, the template's
		// cloud-init address deleted.
		"ipconfig0": "ip=<address>,gw=<gateway>", "nameserver": "<dns>", "delete": "ipconfig0,nameserver"}},
	// A zone's template on another node (templates.go): its config and
	// the shared flag of its storages before a clone with target.
	"GetTemplateConfig": {"GET", "/nodes/{node}/qemu/{vmid}/config",
		map[string]string{"node": "<template's node>", "vmid": "<template>"}},
	"StorageStatus templateStorage": {"GET", "/nodes/{node}/storage/{storage}/status", map[string]string{
		"node": "<template's node>", "storage": "<templateStorage>"}},
	// The started mark before the start (Create step 4): in the
	// description, and as a tag where user-tag-access allows it.
	"MarkStarted": {"PUT", "/nodes/{node}/qemu/{vmid}/config", map[string]string{
		"node": "<node>", "vmid": "<vmid>", "description": "<marks>", "tags": "<tags>"}},
	"StartVM": {"POST", "/nodes/{node}/qemu/{vmid}/status/start", map[string]string{"node": "<node>", "vmid": "<vmid>"}},
	"StopVM":  {"POST", "/nodes/{node}/qemu/{vmid}/status/stop", map[string]string{"node": "<node>", "vmid": "<vmid>"}},
	"DestroyVM": {"DELETE", "/nodes/{node}/qemu/{vmid}", map[string]string{
		"node": "<node>", "vmid": "<vmid>", "purge": "1"}},
	"ListISOs": {"GET", "/nodes/{node}/storage/{storage}/content", map[string]string{
		"node": "<node>", "storage": "<isoStorage>", "content": "iso"}},
	"DeleteISO": {"DELETE", "/nodes/{node}/storage/{storage}/content/{volume}", map[string]string{
		"node": "<node>", "storage": "<isoStorage>", "volume": "<isoStorage>:iso/<seed>"}},
	"UploadSeed": {"POST", "/nodes/{node}/storage/{storage}/upload", map[string]string{
		"node": "<node>", "storage": "<isoStorage>", "content": "iso", "filename": "<seed>"}},
	"StorageStatus isoStorage": {"GET", "/nodes/{node}/storage/{storage}/status", map[string]string{
		"node": "<node>", "storage": "<isoStorage>"}},
	"StorageStatus storage": {"GET", "/nodes/{node}/storage/{storage}/status", map[string]string{
		"node": "<node>", "storage": "<storage>"}},
	"TaskStatus": {"GET", "/nodes/{node}/tasks/{upid}/status", map[string]string{"node": "<node>", "upid": "<upid>"}},
	// Uploads still landing before seeds are listed for deletion
	// (seed.go settleUploads): the node's running imgcopy tasks and the
	// file each writes.
	"ListUploads": {"GET", "/nodes/{node}/tasks", map[string]string{"node": "<node>", "source": "active", "typefilter": "imgcopy"}},
	"TaskLog":     {"GET", "/nodes/{node}/tasks/{upid}/log", map[string]string{"node": "<node>", "upid": "<upid>"}},
}
