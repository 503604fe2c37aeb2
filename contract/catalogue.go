package contract

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Lookup returns catalogue[key]. A key the catalogue lacks is an
// ErrPermanent FieldError naming the field, the key and the keys there are,
// so a Placement value is rejected the same way by every provider, before
// any backend call (§1.2).
func Lookup[V any](field string, catalogue map[string]V, key string) (V, error) {
	v, ok := catalogue[key]
	if !ok {
		keys := slices.Sorted(maps.Keys(catalogue))
		return v, InvalidField(field, key, "not one of: "+strings.Join(keys, ", "))
	}
	return v, nil
}

// LookupZone is Lookup for placement.zone, where an empty zone picks the
// region's only zone (a region with several needs one named).
func LookupZone[V any](zones map[string]V, key string) (V, error) {
	if key == "" && len(zones) == 1 {
		for only := range zones {
			key = only
		}
	}
	return Lookup("placement.zone", zones, key)
}

// CloudInitFits refuses a CloudInit of more than limit bytes, naming the
// field, its size and the channel that bounds it, so the refusal comes
// before any backend call (§1.2).
func CloudInitFits(cloudInit []byte, limit int, channel string) error {
	if len(cloudInit) > limit {
		return InvalidField("cloudInit", fmt.Sprintf("%d bytes", len(cloudInit)), fmt.Sprintf("at most %d bytes through %s", limit, channel))
	}
	return nil
}

// LookupPlacement looks a Placement's region, machine type and image up in
// a provider's catalogues, each as Lookup does; a provider with zones then
// looks the zone up in the region returned (LookupZone).
func LookupPlacement[R, M, I any](p Placement, regions map[string]R, machineTypes map[string]M, images map[string]I) (region R, machine M, image I, err error) {
	if region, err = Lookup("placement.region", regions, p.Region); err != nil {
		return region, machine, image, err
	}
	if machine, err = Lookup("placement.machineType", machineTypes, p.MachineType); err != nil {
		return region, machine, image, err
	}
	image, err = Lookup("placement.image", images, p.Image)
	return region, machine, image, err
}
