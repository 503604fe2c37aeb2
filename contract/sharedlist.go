package contract

// SharedLister is implemented by a Provider whose ListByTag calls share
// their backend listings (§1.3). It is optional, like Checker: the operator
// type-asserts it on the provider it built from the config.
//
// Such a provider MUST run at most one listing of a location at a time,
// however many ListByTag calls wait for it, and MUST answer each call with
// a listing begun after the call was made (a call arriving while a listing
// runs waits for the next one), so sharing never hides an instance that
// existed when the call was made.
//
// The operator then counts such a ListByTag against neither limits.qps nor
// limits.concurrency: the provider bounds its listings itself, and a
// fleet's finalizers, each waiting on the same listing, would otherwise
// hold every call slot while no Delete could run (the fleet benchmark, docs/performance.md).
type SharedLister interface {
	// SharesLists reports whether ListByTag calls share listings as above;
	// a wrapper answers for the provider it wraps.
	SharesLists() bool
}
