// Package contract is the interface between the egress-proxies operator and
// the backends it provisions proxy VMs on (vSphere, Proxmox VE, libvirt,
// OpenStack).
//
// A backend implements [Provider] and, optionally, [Checker]. The rules an
// implementation must follow are stated on each method and, in full, in
// docs/provider-contract.md; the section numbers cited here (§) are that
// document's. The conformance harness in the contracttest module checks
// every rule that can be checked without knowing the backend.
//
// # Errors
//
// Every error a Provider returns belongs to one of four classes (§5):
// [ErrNotFound], [ErrQuota], [ErrPermanent], or transient (everything else,
// retried with back-off). A provider classifies a backend error once, in its
// classify function, with [NotFound], [Quota] or [Permanent]; the result
// satisfies errors.Is for the class and errors.As for the backend's own
// error type. [ClassOf] names the class of any error.
//
// # Observability
//
// The operator opens one operation span per provider call with
// [StartOperation]; the provider opens child spans beneath it with
// [StartSpan] or its SDK's instrumentation. Providers log through
// logr.FromContextOrDiscard(ctx), the logger the operator put there, with the
// keys [LogKeyProvider] and [LogKeyInstance] (§12).
package contract

// Version is the version of the provider contract this module describes
// (docs/provider-contract.md carries the same number). A change to a MUST
// rule bumps the minor version while the contract is v0.
const Version = "v0.6.0"
