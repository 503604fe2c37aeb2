package proxmox

import (
	"regexp"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/providers/proxmox/pvefake"
)

// TestConfigPatternsWithinPVEFormats holds the config's patterns to the
// PVE formats they stand for (ported in pvefake from pve-common and
// pve-access-control): a value Validate lets through must be one PVE
// accepts, or the error would come from the backend, not from the config
// check naming the field. The patterns may be stricter (nodeRE bounds a
// node name to a DNS label).
func TestConfigPatternsWithinPVEFormats(t *testing.T) {
	samples := []string{
		"pve", "pve1", "pve-1", "PVE1", "a", "ab", "a.b", "a_b", "a-", "-a", "1a", "_a", "a.", "local", "local-lvm",
		"vmbr0", "vmbr0.42", "vnet_1", "eth0-1", "vm br", "a/b", "a/b/c", "a/b/c/d", "a//b", "/a", "a/", "pool.x-y_z",
		"debian-12-proxy", "debian.12", "a..b", "ümlaut", "a:b", "a b", "",
	}
	pairs := []struct {
		field  string
		re     *regexp.Regexp
		format string
	}{
		{"zones[].node", nodeRE, "pve-node"},
		{"zones[].isoStorage, storage", storageRE, "pve-storage-id"},
		{"network.bridge", bridgeRE, "pve-bridge-id"},
		{"pool", poolRE, "pve-poolid"},
		{"images[].templateName", dnsNameRE, "dns-name"},
	}
	for _, pair := range pairs {
		accepted := 0
		for _, v := range samples {
			if !pair.re.MatchString(v) {
				continue
			}
			accepted++
			if why := pvefake.CheckFormat(pair.format, v); why != "" {
				t.Errorf("%s accepts %q, which PVE's %s refuses: %s", pair.field, v, pair.format, why)
			}
		}
		if accepted == 0 {
			t.Errorf("%s accepts none of the samples: the comparison would prove nothing", pair.field)
		}
	}
}
