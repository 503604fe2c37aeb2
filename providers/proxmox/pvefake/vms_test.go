package pvefake

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// clone_vm's $check_storage_access_clone: any volume on storage that is
// not shared, a CD-ROM image too, keeps the VM on its node; "none" and the
// host's "cdrom" are no volume.
func TestSharedVM(t *testing.T) {
	s := New(Options{Storages: []StorageSpec{
		{Name: "local", Type: "dir", Content: []string{"iso"}},
		{Name: "local-lvm", Type: "lvmthin", Content: []string{"images"}},
		{Name: "ceph", Type: "rbd", Content: []string{"images"}, Shared: true},
		{Name: "nfs", Type: "nfs", Content: []string{"iso", "images"}, Shared: true},
	}})
	defer s.Close()
	for _, tc := range []struct {
		conf map[string]string
		want bool
	}{
		{map[string]string{"scsi0": "ceph:base-9000-disk-0,size=2G"}, true},
		{map[string]string{"scsi0": "local-lvm:base-9000-disk-0,size=2G"}, false},
		{map[string]string{"scsi0": "ceph:base-9000-disk-0", "ide2": "local:iso/seed.iso,media=cdrom"}, false},
		{map[string]string{"scsi0": "ceph:base-9000-disk-0", "ide2": "nfs:iso/seed.iso,media=cdrom"}, true},
		{map[string]string{"scsi0": "ceph:base-9000-disk-0", "ide2": "none,media=cdrom", "ide0": "cdrom,media=cdrom"}, true},
		{map[string]string{"scsi0": "ceph:base-9000-disk-0", "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0"}, true},
	} {
		if got := s.sharedVM(&vm{conf: tc.conf}); got != tc.want {
			t.Errorf("sharedVM(%v) = %v, want %v", tc.conf, got, tc.want)
		}
	}
}

// update_vm's delete: a split_list (commas, semicolons, spaces), and a
// key both set and deleted in one write is refused before any change
// (qemu-server src/PVE/API2/Qemu.pm update_vm, its quotes as they are).
func TestConfigDelete(t *testing.T) {
	s := newTestServer(t, 9, nil)
	path := "/nodes/pve1/qemu/9000/config"
	if a := call(t, s, "PUT", path, url.Values{"ipconfig0": {"ip=192.0.2.10/24,gw=192.0.2.1"}, "delete": {"ipconfig0"}}); a.status != 400 ||
		a.errors["delete"] != "you can't use '-ipconfig0' and -delete ipconfig0' at the same time" {
		t.Errorf("set and delete ipconfig0: got %d %q %q", a.status, a.reason, a.errors)
	}
	if conf, _ := s.Config(9000); conf["ipconfig0"] != "" {
		t.Errorf("the refused write set ipconfig0 %q", conf["ipconfig0"])
	}
	call(t, s, "PUT", path, url.Values{"ipconfig0": {"ip=192.0.2.10/24,gw=192.0.2.1"}, "nameserver": {"192.0.2.53"}})
	if a := call(t, s, "PUT", path, url.Values{"delete": {"ipconfig0;nameserver"}}); a.status != 200 {
		t.Fatalf("delete: got %d %q %q", a.status, a.reason, a.errors)
	}
	if conf, _ := s.Config(9000); conf["ipconfig0"] != "" || conf["nameserver"] != "" {
		t.Errorf("after delete=ipconfig0;nameserver: ipconfig0 %q, nameserver %q", conf["ipconfig0"], conf["nameserver"])
	}
}

// clone_vm gives each netN of the source a new MAC and keeps its model and
// options ("always change MAC! address", qemu-server API2/Qemu.pm); a
// source without a NIC gives a clone without one.
func TestCloneNICs(t *testing.T) {
	s := newTestServer(t, 9, nil)
	if err := s.SetConfig(9000, "net0", "e1000=BC:24:11:00:00:01,bridge=vmbr7,firewall=1,queues=2"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetConfig(9000, "net1", "virtio=BC:24:11:00:00:02,bridge=vmbr8"); err != nil {
		t.Fatal(err)
	}
	a, err := cloneAndWait(t, s, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for k, rest := range map[string]string{"net0": ",bridge=vmbr7,firewall=1,queues=2", "net1": ",bridge=vmbr8"} {
		model, opts, _ := strings.Cut(a[k], ",")
		if ","+opts != rest || !strings.Contains(model, "=") || strings.HasSuffix(model, "=BC:24:11:00:00:01") || strings.HasSuffix(model, "=BC:24:11:00:00:02") {
			t.Errorf("clone's %s %q: want a new MAC and %q", k, a[k], rest)
		}
	}
	if strings.Split(a["net0"], ",")[0][len("e1000="):] == strings.Split(a["net1"], ",")[0][len("virtio="):] {
		t.Errorf("net0 %q and net1 %q share a MAC", a["net0"], a["net1"])
	}
	s2 := newTestServer(t, 9, nil)
	call(t, s2, "PUT", "/nodes/pve1/qemu/9000/config", url.Values{"delete": {"net0"}})
	b, err := cloneAndWait(t, s2, 1001)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b["net0"]; ok {
		t.Errorf("a clone of a template without a NIC has net0 %q", b["net0"])
	}
}

// cloneAndWait clones template 9000 to newid through the API and returns
// the clone's config once its task ended.
func cloneAndWait(t *testing.T, s *Server, newid int) (map[string]string, error) {
	t.Helper()
	a := call(t, s, "POST", "/nodes/pve1/qemu/9000/clone", url.Values{"newid": {strconv.Itoa(newid)}, "name": {"c" + strconv.Itoa(newid)}})
	if a.status != 200 {
		return nil, fmt.Errorf("clone: %d %q %q", a.status, a.reason, a.errors)
	}
	s.WaitTasks()
	conf, ok := s.Config(newid)
	if !ok {
		return nil, fmt.Errorf("no VM %d after the clone", newid)
	}
	return conf, nil
}

// An Offline storage refuses its content and upload calls as
// activate_storage does, and shows active 0 in the node's storage index.
func TestOfflineStorage(t *testing.T) {
	s := New(Options{
		Nodes:     []string{"pve1"},
		Storages:  []StorageSpec{{Name: "local", Type: "dir", Content: []string{"iso"}}, {Name: "archive", Type: "nfs", Content: []string{"images"}, Shared: true, Offline: true}},
		Templates: []Template{{VMID: 9000, Name: "tmpl", Node: "pve1", Storage: "local"}},
		TokenID:   tTokenID, Secret: tSecret, Version: 9,
	})
	t.Cleanup(s.Close)
	if a := call(t, s, "GET", "/nodes/pve1/storage/archive/content", nil); a.status != 500 || a.reason != "storage 'archive' is not online" {
		t.Errorf("content of an offline storage: %d %q", a.status, a.reason)
	}
	if a := call(t, s, "GET", "/nodes/pve1/storage/local/content", nil); a.status != 200 {
		t.Errorf("content of an online storage: %d %q", a.status, a.reason)
	}
	a := call(t, s, "GET", "/nodes/pve1/storage", nil)
	if a.status != 200 || !strings.Contains(string(a.data), `"active":0`) || !strings.Contains(string(a.data), `"active":1`) {
		t.Errorf("storage index: %d %s, want archive active 0 and local active 1", a.status, a.data)
	}
}
