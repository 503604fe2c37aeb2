package contracttest

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// ClassifyCase is one row of a provider's classify table (template entry
// 13): a backend error as the SDK returns it, captured from the real
// backend or built from its API reference, and the class it must get.
type ClassifyCase struct {
	// Name says what the response is ("NoPermission on CloneVM_Task").
	Name string
	// Err is the error as the SDK returns it.
	Err error
	// Want is contract.ErrNotFound, contract.ErrQuota,
	// contract.ErrPermanent, or nil for transient.
	Want error
	// Source is where the response was captured or which reference it
	// follows; rows without one fail, so every row is traceable.
	Source string
}

// RunClassifyTable runs classify over every case, one subtest each, and
// checks the class, that the SDK error is still reachable with errors.Is
// (and so with errors.As), and that the text is kept.
func RunClassifyTable(t *testing.T, classify func(error) error, cases []ClassifyCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if c.Source == "" {
				t.Error("the case has no Source: say where the response was captured")
			}
			got := classify(c.Err)
			want := contract.ClassOf(c.Want)
			if c.Want == nil {
				want = contract.ClassTransient
			}
			if cls := contract.ClassOf(got); cls != want {
				t.Errorf("classify(%v) has class %s, want %s", c.Err, cls, want)
			}
			if !reaches(got, c.Err) {
				t.Errorf("classify(%v) lost the SDK error: errors.Is fails", c.Err)
			}
			if got.Error() == "" {
				t.Errorf("classify(%v) has an empty text", c.Err)
			}
		})
	}
}

// reaches reports whether want is in got's chain: errors.Is, or for an
// SDK error errors.Is cannot compare (a struct holding a slice, such as
// gophercloud's response errors), an equal value in the chain.
func reaches(got, want error) bool {
	if errors.Is(got, want) {
		return true
	}
	if reflect.TypeOf(want).Comparable() {
		return false
	}
	return slices.ContainsFunc(errorTree(got), func(e error) bool { return reflect.DeepEqual(e, want) })
}

// errorTree returns err and every error it wraps, through Unwrap() error
// and errors.Join's Unwrap() []error; at most maxErrorTree of them,
// against an error that wraps itself.
func errorTree(err error) []error {
	var out []error
	for stack := []error{err}; len(stack) > 0 && len(out) < maxErrorTree; {
		e := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if e == nil {
			continue
		}
		out = append(out, e)
		switch u := e.(type) { //nolint:errorlint // this walks the chain itself
		case interface{ Unwrap() error }:
			stack = append(stack, u.Unwrap())
		case interface{ Unwrap() []error }:
			stack = append(stack, u.Unwrap()...)
		}
	}
	return out
}

// maxErrorTree bounds errorTree.
const maxErrorTree = 256
