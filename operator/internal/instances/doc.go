// Package instances is what an operation does to a Proxy's VMs at the
// backend, in its goroutine beside the workers (operation.Runner): look at
// one (Check, Look: its state, its probe, the Delete of a stopped one) and
// delete them all (Sweep, SweepAndRelease). It knows a Proxy by its UID
// mark only, never its API type: the reconcile that runs the operation
// turns what it found into the Proxy's status, conditions and events.
//
// An instance is a Proxy's only when its UID mark is the Proxy's UID
// (CarriesUID): instance names and providerIDs are the backend's keys, and
// backends reuse them (a VMID freed and taken again, a VM of another
// install named alike), so nothing here probes, deletes or lists as the
// Proxy's an instance without it (docs/architecture.md, Principles).
package instances

import "github.com/egress-proxies/egress-proxies-operator/contract"

// CarriesUID reports whether inst carries the Proxy UID uid.
func CarriesUID(inst contract.Instance, uid string) bool { return inst.UID == uid }
