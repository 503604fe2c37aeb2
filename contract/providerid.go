package contract

import (
	"regexp"
	"strings"
)

// MaxProviderIDLength bounds a providerID; longer input is malformed
// whatever its shape.
const MaxProviderIDLength = 512

// IDFormat is a provider's providerID shape (§6): "<location>/<key>" when
// Location is set, or a location-free "<key>" when it is nil. Location
// matches the config value that names the location (a region, a host, a
// datacenter) and Key the name or backend-allocated identifier. Both
// patterns must be anchored and must not match "/".
type IDFormat struct {
	Location *regexp.Regexp
	Key      *regexp.Regexp
}

// Format joins location and key into a providerID. location is ignored for
// a location-free format.
func (f IDFormat) Format(location, key string) string {
	if f.Location == nil {
		return key
	}
	return location + "/" + key
}

// Parse splits id strictly: exactly the shape, every part matching its
// pattern. Anything else, before any backend call, is an ErrPermanent
// naming the value.
func (f IDFormat) Parse(id string) (location, key string, err error) {
	if id == "" || len(id) > MaxProviderIDLength {
		return "", "", f.malformed(id)
	}
	if f.Location == nil {
		if !f.Key.MatchString(id) {
			return "", "", f.malformed(id)
		}
		return "", id, nil
	}
	location, key, ok := strings.Cut(id, "/")
	if !ok || !f.Location.MatchString(location) || !f.Key.MatchString(key) {
		return "", "", f.malformed(id)
	}
	return location, key, nil
}

func (f IDFormat) shape() string {
	if f.Location == nil {
		return "<key>"
	}
	return "<location>/<key>"
}

func (f IDFormat) malformed(id string) error {
	if len(id) > 80 {
		id = id[:80] + "…"
	}
	return InvalidField("providerID", id, "malformed, want "+f.shape())
}
