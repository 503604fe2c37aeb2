package pvefake

import "testing"

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
