package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest/memprovider"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/config"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
	"github.com/egress-proxies/egress-proxies-operator/providers/libvirt"
	"github.com/egress-proxies/egress-proxies-operator/providers/openstack"
	"github.com/egress-proxies/egress-proxies-operator/providers/proxmox"
	"github.com/egress-proxies/egress-proxies-operator/providers/vsphere"
)

// validating registers each provider type with its own config validation
// and no constructor: the test checks the shipped blocks, not a backend.
func validating() providers.Registry {
	reg := providers.Registry{}
	reg.Register(validateOnly(vsphere.Type, vsphere.Config.Validate))
	reg.Register(validateOnly(libvirt.Type, libvirt.Config.Validate))
	reg.Register(validateOnly(proxmox.Type, proxmox.Config.Validate))
	reg.Register(validateOnly(openstack.Type, openstack.Config.Validate))
	// The memory block decodes into memprovider.Config but for the token,
	// which the operator sets (providers_memory.go).
	reg.Register(validateOnly(memprovider.Type, func(c memprovider.Config) error { c.Token = "test"; return c.Validate() }))
	return reg
}

func validateOnly[C any](typ string, validate func(C) error) providers.Constructor {
	return providers.Typed(typ, validate, func(C) (contract.Provider, error) { return nil, nil })
}

// commentedEntry is the first line of a commented-out provider entry.
var commentedEntry = regexp.MustCompile(`^(\s*)# - name: (\S+)$`)

// Every commented provider block of the shipped providers config, once
// uncommented, passes its provider's own validation: a user who uncomments
// one gets placeholders to fill, not a config error.
func TestShippedProviderBlocksValidate(t *testing.T) {
	lines := strings.Split(shippedConfig(t), "\n")
	found := 0
	for i := 0; i < len(lines); i++ {
		m := commentedEntry.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, name := m[1], m[2]
		// The block is the entry's line and the commented lines indented
		// under it; prose comments ("# vSphere (build with …") end it.
		block := []string{"providers:", indent + "- name: " + name}
		for i++; i < len(lines) && strings.HasPrefix(lines[i], indent+"#   "); i++ {
			block = append(block, indent+strings.TrimPrefix(lines[i], indent+"# "))
		}
		i--
		found++
		t.Run(name, func(t *testing.T) {
			text := strings.Join(block, "\n")
			// Placeholders a user replaces, which validation rightly refuses.
			text = strings.ReplaceAll(text, "<64 hex digits>", strings.Repeat("ab", 32))
			if _, err := config.Parse([]byte(text), validating()); err != nil {
				t.Errorf("the shipped %s block does not validate: %v\n%s", name, err, text)
			}
		})
	}
	if found != 5 {
		t.Errorf("found %d commented provider blocks, want one per provider type (5)", found)
	}
}
