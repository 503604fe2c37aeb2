// Package contracttest is the provider conformance harness (contract §11).
//
// A provider's test builds a [Config] — how to make the provider, a valid
// placement, and a backend control — and calls [Run]. Each rule of the
// contract is one named subtest, named as the rule is named in
// docs/provider-contract.md §11, so a failure points at its rule:
//
//	func TestContract(t *testing.T) {
//		backend := startFakeBackend(t)
//		contracttest.Run(t, contracttest.Config{
//			NewProvider: func(t *testing.T) contract.Provider { return newProvider(t, backend.URL) },
//			Placement:   contract.Placement{Region: "r1", MachineType: "small", Image: "debian-12"},
//			Backend:     backend.Control(),
//			Credential:  "sentinel-token-3f9a",
//		})
//	}
//
// The backend control may implement any of the capability interfaces in
// backend.go (GuestReporter, Locker, Staller, CallCutter, Resetter, …). A
// rule that needs a capability the control lacks is skipped with a message
// naming it, never passed silently; a provider should implement every
// capability its test backend can play. Config.OtherPlacements (a second
// location) and Config.MaxCloudInit (the channel's limit) switch on the
// rules that need them.
//
// Every rule starts on a reset backend, runs its calls as the operator
// does (several at once where §1.3 says the operator does), and ends with
// every instance it asked for deleted and the backend's Inventory no larger
// than it found it. What each rule checks is its doc comment and
// docs/provider-contract.md §11; the sentinel rules also capture the
// process's stderr and global loggers while they run, so Run must not be
// called from parallel tests.
//
// Where a MUST has more than one shape, a rule draws its shape from a
// generator seeded by Config.Seed (else CONTRACTTEST_SEED, else a new seed
// each run), so that a provider right for one shape and wrong beside it
// is caught on some run; a failed rule names its seed, which draws the
// same shapes again. What is drawn so far: StaticAddressDelivered's
// second network (a gateway anywhere among the network's host addresses
// but the first and the request's, and two to contract.MaxDNS
// resolvers); ListByTagFindsMarked's instances under one UID (a Proxy's
// replicas: one or two more, the first in the same placement, the other
// in a drawn one); RejectedCredentialIsNotGone's refusals partway through
// a Delete (from up to three of its later calls, with
// CredentialRejecterFrom); ErrorsCarryTheirClass's faults on a later call
// of an operation (a quota or permission failure on up to two of the
// calls after the first of a Create, a Get, a ListByTag and a Delete, with
// CallFailer); CreateResumesAfterFailure's cut Creates that
// carry a static network (one of each step's two, with a NetworkReader).
// Where one shape is the hardest, the rule uses it every run
// instead: ListByTagSeparatesOwners' second Owner extends the first to
// the 63 characters an Owner may have, which catches both a prefix match
// and any truncation. ConcurrentCallsAreSafe draws nothing but repeats:
// after its races it makes ten rounds of Deletes, Gets and lists at once
// on the instances gone, so that the race detector, which a lock the calls
// share elsewhere often blinds, sees a cache no lock guards on every run.
// CallsAreBounded also makes a provider while the backend hangs, every
// run: its constructor must return at once and its first call, which
// connects and logs in, within the call budget, so a provider that bounds
// its calls but not its dial fails.
// ListByTagExcludesUnmarked and CreateNeverAdoptsUnmarked, with a
// UIDMarkedCreator, also meet an instance with the UID mark and no
// managed mark, every run. EgressKeptPerReplica, with a
// StrayEgressMaker, keeps two addresses with the Owner's mark and no
// replica mark (one with the UID mark too) beside the rule's, made first,
// every run: ListEgress must list the rule's, each once and under its
// own region, and never those.
// CheckerReasons holds the credentials target before the targets of its
// scope (§9), every run.
// LogLinesNameTheInstance captures the process-wide outputs too, so a
// provider that logs only outside the logger in ctx fails instead of
// being skipped as one that logs nothing.
// SharedListsAreFresh holds, with a ListingHolder, a listing after its
// snapshot instead of relying on a backend's latency, so that a call
// joining the listing under way, or a "shared" listing that shares
// nothing, fails every run.
//
// This is a module of its own so that the contract module stays free of the
// OpenTelemetry SDK, which the harness needs to record spans.
//
// The harness also offers [RunClassifyTable] for a provider's classify table
// test and [RunLifecycle] for its real-backend lifecycle test.
package contracttest
