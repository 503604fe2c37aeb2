//go:build memory

package main

import (
	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest/memprovider"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// The memory type is the reference provider over an in-process Cloud, for
// development and tests: its VMs live in the operator's memory.
func init() {
	constructors.Register(providers.Typed(memprovider.Type,
		func(c memoryBlock) error { return c.config().Validate() },
		func(c memoryBlock) (contract.Provider, error) {
			images := make([]string, 0, len(c.Images))
			for _, image := range c.Images {
				images = append(images, image)
			}
			return memprovider.New(c.config(), memprovider.NewCloud(memoryToken, c.Regions, images, 0))
		}))
}

// memoryToken authenticates the provider to its own in-process Cloud.
const memoryToken = "in-process"

// memoryBlock is the `memory:` block of the providers config.
type memoryBlock struct {
	Regions      []string                           `json:"regions"`
	MachineTypes map[string]memprovider.MachineType `json:"machineTypes"`
	Images       map[string]string                  `json:"images"`
}

func (c memoryBlock) config() memprovider.Config {
	return memprovider.Config{Token: memoryToken, Regions: c.Regions, MachineTypes: c.MachineTypes, Images: c.Images}
}
