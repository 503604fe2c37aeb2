package vsphere

import (
	"fmt"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// The config's fields that name inventory locations, as an error names
// them: a location is not an instance, and one vSphere does not show is a
// config to fix, never "the VM is gone" (spec entry 13).

func datacenterField(regionName string) string {
	return fmt.Sprintf("regions[%q].datacenter", regionName)
}
func folderField(regionName string) string { return fmt.Sprintf("regions[%q].folder", regionName) }
func imageField(image string) string       { return fmt.Sprintf("images[%q]", image) }
func zoneField(regionName, zoneName, field string) string {
	return fmt.Sprintf("regions[%q].zones[%q].%s", regionName, zoneName, field)
}

// locationError classifies the failed lookup of the location the config
// field names at path. vCenter's finder sees only what the user may read,
// so a location that is missing and one the user may not read both come
// back as not found: Permanent, naming field and path, so that Get never
// reads it as the VM gone (which would have the operator recreate it) nor
// Delete as nothing to delete (which would leak the VM). Other errors keep
// their class.
func locationError(field, path string, err error) error {
	err = fmt.Errorf("%s %q: %w", field, path, err)
	if isNotFound(err) {
		return contract.Permanentf("%w (missing, or not visible to the user: check the path and the user's System.Read on it)", err)
	}
	return err
}
