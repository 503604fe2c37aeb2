package memprovider

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"
)

// Config is the reference provider's config block: what a real provider's
// `<type>:` block in the providers config carries, in miniature.
type Config struct {
	// Token authenticates every call. Secret: never logged (contract §7).
	Token string `json:"token"`
	// Regions are the locations the provider creates in and lists; each
	// becomes the first segment of a providerID.
	Regions []string `json:"regions"`
	// MachineTypes is the machine-type catalogue, keyed by
	// Placement.MachineType.
	MachineTypes map[string]MachineType `json:"machineTypes"`
	// Images is the image catalogue: Placement.Image to the Cloud's image
	// name.
	Images map[string]string `json:"images"`
	// CallTimeout bounds every Cloud call (contract §1.5). Default 30 s.
	CallTimeout time.Duration `json:"callTimeout"`
	// Egress gives each replica of a Proxy an egress address of its own,
	// kept across its instances until released (contract.EgressKeeper).
	Egress bool `json:"egress,omitempty"`
}

// MachineType is one machine-type catalogue entry.
type MachineType struct {
	CPUs      int `json:"cpus"`
	MemoryMiB int `json:"memoryMiB"`
}

// regionRE bounds region names: they are pasted into providerIDs.
var regionRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$`)

// Validate reports every problem at once, each naming the field and value.
func (c Config) Validate() error {
	var errs []error
	if c.Token == "" {
		errs = append(errs, errors.New("token: must be set"))
	}
	if len(c.Regions) == 0 {
		errs = append(errs, errors.New("regions: at least one region is required"))
	}
	for i, r := range c.Regions {
		if !regionRE.MatchString(r) {
			errs = append(errs, fmt.Errorf("regions[%d] %q: must match %s", i, r, regionRE))
		}
		if slices.Index(c.Regions, r) != i {
			errs = append(errs, fmt.Errorf("regions[%d] %q: listed twice", i, r))
		}
	}
	if len(c.MachineTypes) == 0 {
		errs = append(errs, errors.New("machineTypes: at least one entry is required"))
	}
	for k, mt := range c.MachineTypes {
		if mt.CPUs < 1 || mt.MemoryMiB < 256 {
			errs = append(errs, fmt.Errorf("machineTypes[%q]: cpus %d and memoryMiB %d: want at least 1 and 256", k, mt.CPUs, mt.MemoryMiB))
		}
	}
	if len(c.Images) == 0 {
		errs = append(errs, errors.New("images: at least one entry is required"))
	}
	if c.CallTimeout < 0 {
		errs = append(errs, fmt.Errorf("callTimeout %s: must not be negative", c.CallTimeout))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.CallTimeout == 0 {
		c.CallTimeout = 30 * time.Second
	}
	return c
}
