package libvirt

import (
	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"
)

// offersKVM reads the host's capabilities (virConnectGetCapabilities,
// https://libvirt.org/formatcaps.html): a host that can run KVM guests
// lists, for its own architecture's hvm guest, a <domain type='kvm'>
// beside 'qemu'. The domain XML names no architecture, so libvirt builds
// it for the host's: that guest entry is the one that counts. The test
// driver lists only type 'test'.
func offersKVM(c *libvirt.Connect) (bool, error) {
	doc, err := c.GetCapabilities()
	if err != nil {
		return false, err
	}
	var caps libvirtxml.Caps
	if err := caps.Unmarshal(doc); err != nil {
		return false, err
	}
	return capsOfferKVM(caps), nil
}

func capsOfferKVM(caps libvirtxml.Caps) bool {
	arch := ""
	if caps.Host.CPU != nil {
		arch = caps.Host.CPU.Arch
	}
	for _, g := range caps.Guests {
		if g.OSType != "hvm" || g.Arch.Name != arch {
			continue
		}
		for _, d := range g.Arch.Domains {
			if d.Type == DomainTypeKVM {
				return true
			}
		}
	}
	return false
}

// learnDomainType records, when a connection opens, whether the region's
// host offers KVM: "auto" becomes kvm or qemu by it, and the Checker
// holds an explicit kvm to it. One call per connection, not per Create.
func (p *Provider) learnDomainType(region string, c *libvirt.Connect) error {
	kvm, err := offersKVM(c)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.kvm[region] = kvm
	p.mu.Unlock()
	return nil
}

// domainType is the type a new domain in the region gets: the configured
// one, or for "auto" kvm where the host offered it at connect, else qemu.
func (p *Provider) domainType(region string) string {
	if p.cfg.DomainType != DomainTypeAuto {
		return p.cfg.DomainType
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kvm[region] {
		return DomainTypeKVM
	}
	return DomainTypeQEMU
}
