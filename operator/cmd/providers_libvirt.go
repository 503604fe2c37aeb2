//go:build libvirt

package main

import (
	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
	"github.com/egress-proxies/egress-proxies-operator/providers/libvirt"
)

// The libvirt provider links libvirt.so.0 through cgo: building with this
// tag needs libvirt's headers and pkg-config (Debian: libvirt-dev,
// pkg-config).
func init() {
	constructors.Register(providers.Typed(libvirt.Type,
		libvirt.Config.Validate,
		func(c libvirt.Config) (contract.Provider, error) { return libvirt.New(c) }))
}
