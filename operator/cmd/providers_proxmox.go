//go:build proxmox

package main

import (
	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
	"github.com/egress-proxies/egress-proxies-operator/providers/proxmox"
)

func init() {
	constructors.Register(providers.Typed(proxmox.Type,
		proxmox.Config.Validate,
		func(c proxmox.Config) (contract.Provider, error) { return proxmox.New(c) }))
}
