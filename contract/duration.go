package contract

import (
	"fmt"
	"time"
)

// Duration is a time.Duration written as a string ("30s", "10m") in a
// provider's config block; every provider's timeouts use it.
type Duration struct{ time.Duration }

// UnmarshalJSON reads "30s", "10m"; a bare number is refused, since its
// unit would be a guess.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) < 2 || s[0] != '"' {
		return fmt.Errorf("duration %s: want a string such as \"30s\"", s)
	}
	v, err := time.ParseDuration(s[1 : len(s)-1])
	d.Duration = v
	return err
}

// MarshalJSON writes the string UnmarshalJSON reads.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(`"` + d.String() + `"`), nil
}
