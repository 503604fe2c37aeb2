package contracttest

import (
	"errors"
	"fmt"
	"testing"
)

// sliceErr is an SDK error errors.Is cannot compare, as gophercloud's
// response errors are (they hold the body as a []byte).
type sliceErr struct{ body []byte }

func (e sliceErr) Error() string { return string(e.body) }

func TestReaches(t *testing.T) {
	sdk := sliceErr{body: []byte("quota exceeded")}
	if !reaches(fmt.Errorf("create: %w", sdk), sdk) {
		t.Error("a wrapped uncomparable SDK error was not found")
	}
	if !reaches(errors.Join(errors.New("other"), fmt.Errorf("x: %w", sdk)), sdk) {
		t.Error("an uncomparable SDK error behind errors.Join was not found")
	}
	if reaches(fmt.Errorf("create: %v", sdk), sdk) { //nolint:errorlint // flattened on purpose
		t.Error("an SDK error flattened to text counts as kept")
	}
	if reaches(fmt.Errorf("create: %w", sliceErr{body: []byte("other")}), sdk) {
		t.Error("a different SDK error counts as the same")
	}
	sentinel := errors.New("sentinel")
	if !reaches(fmt.Errorf("x: %w", sentinel), sentinel) || reaches(errors.New("sentinel"), sentinel) {
		t.Error("comparable errors are not judged by errors.Is")
	}
}
