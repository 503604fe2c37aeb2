package providers

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	kjson "sigs.k8s.io/json"
)

// DecodeStrict decodes a JSON document into out as the API server decodes
// an object: keys match field names case-sensitively, and an unknown or a
// duplicate key is refused (sigs.k8s.io/json's UnmarshalStrict, the
// decoder apimachinery uses). encoding/json matches keys without regard to
// case, so `installid` and `installId` were taken as `installID`. The
// refused keys come back as KeyErrors, so a caller can say where they are.
func DecodeStrict(raw []byte, out any) error {
	strict, err := kjson.UnmarshalStrict(raw, out)
	if err != nil {
		return err
	}
	var keys KeyErrors
	for _, e := range strict {
		var fe kjson.FieldError
		if !errors.As(e, &fe) {
			return e
		}
		// The error's type is unexported; its text is the problem, a
		// space and the quoted path (sigs.k8s.io/json's strictError.Error).
		keys = append(keys, KeyError{Path: fe.FieldPath(), Problem: strings.TrimSuffix(e.Error(), " "+strconv.Quote(fe.FieldPath()))})
	}
	if keys != nil {
		return keys
	}
	return nil
}

// KeyError is one key a strict decode refused: its path inside the
// decoded document ("minAge", "networks[0].name") and the problem
// ("unknown field", "duplicate field").
type KeyError struct {
	Path, Problem string
}

// KeyErrors are every key a strict decode refused.
type KeyErrors []KeyError

func (k KeyErrors) Error() string {
	s := make([]string, len(k))
	for i, e := range k {
		s[i] = fmt.Sprintf("%s %q", e.Problem, e.Path)
	}
	return strings.Join(s, "; ")
}
