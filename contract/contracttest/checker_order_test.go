package contracttest

import "testing"

// The providers' own target lists (memprovider, vSphere, OpenStack:
// "credentials" first; Proxmox: one per region; libvirt: none), and the
// orders §9 forbids.
func TestCredentialsNotFirst(t *testing.T) {
	for _, c := range []struct {
		targets []string
		want    string
	}{
		{[]string{"credentials", "region/r1", "image/debian-12"}, ""},
		{[]string{"region/a/credentials", "region/a/zone/z", "region/b/credentials", "region/b/zone/z"}, ""},
		{[]string{"region/lab", "region/lab/pool", "image/proxy"}, ""},
		{[]string{"region/r1", "credentials"}, "credentials"},
		{[]string{"region/a/zone/z", "region/a/credentials"}, "region/a/credentials"},
		{[]string{"region/a/credentials", "region/b/zone/z", "region/b/credentials"}, "region/b/credentials"},
		{[]string{"image/x-credentials", "region/r1"}, ""},
	} {
		if got := credentialsNotFirst(c.targets); got != c.want {
			t.Errorf("credentialsNotFirst(%q) = %q, want %q", c.targets, got, c.want)
		}
	}
}
