package contract

import (
	"context"
	"errors"
)

// Checker is implemented by a Provider that can tell whether its backend
// works (§9). It is optional, in the style of database/sql's driver.Pinger:
// the operator type-asserts it, and a provider without it gets a
// ProviderHealth with the single result {Target: "provider", Reason:
// ReasonNotChecked}.
type Checker interface {
	// Check verifies each thing that can fail independently (credentials,
	// each location, network, image) and returns one result per target.
	//
	// Check MUST return the same targets in the same order on every call,
	// use the same credential, verb and scope as Create and ListByTag, stay
	// cheap (one page, one object per target), and return promptly once ctx
	// is done, reporting the targets it could not check with ReasonTimeout
	// and OK false. It never returns an error: a failure is a result.
	Check(ctx context.Context) []CheckResult
}

// CheckResult is the outcome of one check target.
type CheckResult struct {
	// Target names what was checked: "credentials", "region/<name>",
	// "image/<key>", … Stable across calls.
	Target string
	// OK is true when the target works.
	OK bool
	// Reason is one of the shared reasons below, or a provider-specific one
	// that its spec justifies. ReasonOK exactly when OK.
	Reason string
	// Message says what failed in words an admin can act on; never a
	// credential.
	Message string
	// Details carries facts about the target (a version, a free-space
	// figure, the resolved object's ID). Keys are listed in the provider's
	// spec (entry 16).
	Details map[string]string
}

// The shared check reasons (§9). A provider uses these first; a reason of
// its own needs an entry in its spec saying what the admin does differently.
const (
	ReasonOK = "OK"
	// ReasonUnauthenticated: the backend rejected the credential (missing,
	// wrong, expired).
	ReasonUnauthenticated = "Unauthenticated"
	// ReasonForbidden: the credential works but lacks a privilege.
	ReasonForbidden = "Forbidden"
	// ReasonNotFound: a configured object (datacenter, node, network,
	// image, pool) does not exist.
	ReasonNotFound = "NotFound"
	// ReasonQuotaExceeded: the target is out of quota or capacity.
	ReasonQuotaExceeded = "QuotaExceeded"
	// ReasonUnreachable: the endpoint could not be reached (DNS, connect,
	// TLS handshake, certificate).
	ReasonUnreachable = "Unreachable"
	// ReasonTimeout: the check did not finish before its bound or ctx.
	ReasonTimeout = "Timeout"
	// ReasonMisconfigured: the config names something the backend cannot use
	// as configured (wrong kind of object, a template that is not a
	// template).
	ReasonMisconfigured = "Misconfigured"
	// ReasonBackendError: any other failure the backend reported.
	ReasonBackendError = "BackendError"
	// ReasonNotChecked: the provider does not implement Checker.
	ReasonNotChecked = "NotChecked"
)

// SharedReasons lists the shared reasons.
var SharedReasons = []string{
	ReasonOK, ReasonUnauthenticated, ReasonForbidden, ReasonNotFound,
	ReasonQuotaExceeded, ReasonUnreachable, ReasonTimeout,
	ReasonMisconfigured, ReasonBackendError, ReasonNotChecked,
}

// ResultFromError is the default mapping from a classified error to a check
// result: success, a done context (Timeout), a credential file that cannot
// be used (Unauthenticated), ErrNotFound, ErrQuota, and BackendError for
// the rest. Providers map authentication, permission and
// reachability failures themselves, since only they can tell them apart.
func ResultFromError(target string, err error) CheckResult {
	r := CheckResult{Target: target, OK: err == nil, Reason: ReasonOK}
	if err == nil {
		return r
	}
	r.Message = err.Error()
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		r.Reason = ReasonTimeout
	case errors.As(err, new(*CredentialError)):
		r.Reason = ReasonUnauthenticated
	case errors.Is(err, ErrNotFound):
		r.Reason = ReasonNotFound
	case errors.Is(err, ErrQuota):
		r.Reason = ReasonQuotaExceeded
	default:
		r.Reason = ReasonBackendError
	}
	return r
}
