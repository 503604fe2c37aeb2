//go:build openstack

package main

import (
	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
	"github.com/egress-proxies/egress-proxies-operator/providers/openstack"
)

func init() {
	constructors.Register(providers.Typed(openstack.Type,
		openstack.Config.Validate,
		func(c openstack.Config) (contract.Provider, error) { return openstack.New(c) }))
}
