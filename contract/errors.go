package contract

import (
	"context"
	"errors"
	"fmt"
)

// The three named error classes (§5). Every other error is transient: the
// operator retries it with exponential back-off.
var (
	// ErrNotFound: the instance does not exist (any more). Get returns it
	// for a deleted instance; the operator then recreates or, when deleting,
	// removes its finalizer.
	ErrNotFound = errors.New("not found")
	// ErrQuota: the backend refused for lack of quota or capacity. The
	// operator backs off long and reports reason QuotaExceeded.
	ErrQuota = errors.New("quota exceeded")
	// ErrPermanent: the request will fail the same way until a person
	// changes the spec, the config or the backend. No hot retry.
	ErrPermanent = errors.New("permanent failure")
)

// ErrPartialList marks a ListByTag result that omits locations that could
// not be read (list-partial: omit-unreachable, §4.11). Its class is
// transient; the garbage collector deletes nothing on its strength alone
// beyond what the returned instances show.
var ErrPartialList = errors.New("partial list: some locations could not be read")

// Class names an error class; it is what metrics and the Proxy's status
// carry.
type Class string

// The classes ClassOf returns; ClassNone is the class of a nil error.
const (
	ClassNone      Class = ""
	ClassNotFound  Class = "NotFound"
	ClassQuota     Class = "Quota"
	ClassPermanent Class = "Permanent"
	ClassTransient Class = "Transient"
)

// ClassOf returns the class of err. A done context (context.Canceled or
// context.DeadlineExceeded anywhere in the chain) is always transient, even
// if a provider wrapped it in a named class by mistake: the work was cut
// off, not refused.
func ClassOf(err error) Class {
	switch {
	case err == nil:
		return ClassNone
	case isContextErr(err):
		return ClassTransient
	case errors.Is(err, ErrNotFound):
		return ClassNotFound
	case errors.Is(err, ErrQuota):
		return ClassQuota
	case errors.Is(err, ErrPermanent):
		return ClassPermanent
	default:
		return ClassTransient
	}
}

// NotFound classifies err as ErrNotFound. See [Wrap].
func NotFound(err error) error { return Wrap(ErrNotFound, err) }

// Quota classifies err as ErrQuota. See [Wrap].
func Quota(err error) error { return Wrap(ErrQuota, err) }

// Permanent classifies err as ErrPermanent. See [Wrap].
func Permanent(err error) error { return Wrap(ErrPermanent, err) }

// Permanentf formats a message and classifies it as ErrPermanent; %w verbs
// keep their targets reachable.
func Permanentf(format string, args ...any) error {
	return Permanent(fmt.Errorf(format, args...))
}

// Wrap returns err classified as class (ErrNotFound, ErrQuota or
// ErrPermanent) without changing its text: errors.Is(result, class) is true
// and errors.As still reaches the backend's own error type inside err.
//
// Wrap returns err unchanged when err is nil, already carries a class, or
// comes from a done context (cancellation stays transient, see [ClassOf]),
// so a provider's classify may be applied twice without harm.
func Wrap(class, err error) error {
	if err == nil || isContextErr(err) {
		return err
	}
	if c := ClassOf(err); c != ClassTransient {
		return err
	}
	return &classified{class: class, err: err}
}

type classified struct {
	class error
	err   error
}

func (e *classified) Error() string   { return e.err.Error() }
func (e *classified) Unwrap() []error { return []error{e.class, e.err} }

// FieldError is a validation failure of one request or config field. Its
// text names the field and the value, as every validation error must (§2).
type FieldError struct {
	Field  string // dotted path, e.g. "placement.machineType"
	Value  string // the offending value, quoted in Error
	Detail string // what is wrong or what is allowed
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s %q: %s", e.Field, e.Value, e.Detail)
}

// InvalidField returns a FieldError classified as ErrPermanent.
func InvalidField(field, value, detail string) error {
	return Permanent(&FieldError{Field: field, Value: value, Detail: detail})
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
