package release

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The libvirt and Proxmox providers write seed ISOs with os.CreateTemp("",
// …): $TMPDIR, else /tmp. Under the Deployment's read-only root
// filesystem that directory must be a volume of its own, bounded.
func TestTempDirIsWritable(t *testing.T) {
	dep := deployment(t, render(t))
	pod := dep.Spec.Template.Spec
	for _, c := range pod.Containers {
		if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
			t.Errorf("container %s: the root filesystem is writable; the install should keep it read-only", c.Name)
			continue
		}
		tmp := "/tmp"
		for _, e := range c.Env {
			if e.Name == "TMPDIR" {
				tmp = e.Value
			}
		}
		var volume *corev1.Volume
		for _, m := range c.VolumeMounts {
			if m.MountPath == tmp && !m.ReadOnly {
				for i := range pod.Volumes {
					if pod.Volumes[i].Name == m.Name {
						volume = &pod.Volumes[i]
					}
				}
			}
		}
		switch {
		case volume == nil:
			t.Errorf("container %s: nothing writable is mounted at %s, where the providers write seed ISOs", c.Name, tmp)
		case volume.EmptyDir == nil:
			t.Errorf("container %s: %s is volume %s, not an emptyDir", c.Name, tmp, volume.Name)
		case volume.EmptyDir.SizeLimit == nil:
			t.Errorf("container %s: the emptyDir at %s has no sizeLimit", c.Name, tmp)
		}
	}
}
