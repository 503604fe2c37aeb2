//go:build vsphere

package main

import (
	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
	"github.com/egress-proxies/egress-proxies-operator/providers/vsphere"
)

func init() {
	constructors.Register(providers.Typed(vsphere.Type,
		vsphere.Config.Validate,
		func(c vsphere.Config) (contract.Provider, error) { return vsphere.New(c) }))
}
