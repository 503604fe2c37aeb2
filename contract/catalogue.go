package contract

import (
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
