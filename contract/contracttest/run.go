package contracttest

import (
	"slices"
	"testing"
)

// rule is one contract rule: its name in docs/provider-contract.md §11 and
// the check.
type rule struct {
	name  string
	check func(e *env)
}

// rules lists every rule in the order of the contract's §11 list; the
// template's entry 21 items come first, the harness's further checks after.
var rules = []rule{
	{"RepeatCreate", repeatCreate},
	{"GetAfterDelete", getAfterDelete},
	{"DeleteTwice", deleteTwice},
	{"MalformedID", malformedID},
	{"UnknownStateIsStopped", unknownStateIsStopped},
	{"PoweredOffIsStopped", poweredOffIsStopped},
	{"RunningRequiresIP", runningRequiresIP},
	{"UIDAndCreatedAtReadBack", uidAndCreatedAtReadBack},
	{"ListByTagExcludesUnmarked", listByTagExcludesUnmarked},
	{"GetDuringDelete", getDuringDelete},
	{"GetDuringLock", getDuringLock},
	{"NeverStartedIsNeverStopped", neverStartedIsNeverStopped},
	{"CancelledContextReturnsPromptly", cancelledContextReturnsPromptly},
	{"CheckerReasons", checkerReasons},
	{"SentinelCloudInit", sentinelCloudInit},
	{"SentinelCredential", sentinelCredential},
	{"ChildSpans", childSpans},

	{"InvalidRequestRejectedBeforeBackend", invalidRequestRejectedBeforeBackend},
	{"CloudInitByteForByte", cloudInitByteForByte},
	{"StaticAddressDelivered", staticAddressDelivered},
	{"CreateResumesAfterFailure", createResumesAfterFailure},
	{"CreateNeverAdoptsUnmarked", createNeverAdoptsUnmarked},
	{"ListByTagFindsMarked", listByTagFindsMarked},
	{"ListByTagSeparatesOwners", listByTagSeparatesOwners},
	{"CreateAdoptsAnyOwner", createAdoptsAnyOwner},
	{"OnlyRoutableIPv4", onlyRoutableIPv4},
	{"ErrorsCarryTheirClass", errorsCarryTheirClass},
	{"CallsAreBounded", callsAreBounded},
	{"DeleteLeavesNothing", deleteLeavesNothing},
	{"LogLinesNameTheInstance", logLinesNameTheInstance},
	{"ConcurrentCallsAreSafe", concurrentCallsAreSafe},
	{"ListByTagCoversEveryLocation", listByTagCoversEveryLocation},
	{"SharedListsAreFresh", sharedListsAreFresh},
	{"DeleteResumesAfterFailure", deleteResumesAfterFailure},
	{"RejectedCredentialIsNotGone", rejectedCredentialIsNotGone},
	{"EgressKeptPerReplica", egressKeptPerReplica},
}

// Run checks the provider cfg describes against every rule of the
// contract, one subtest per rule. Rules run one after another: the backend
// control's faults and stalls are global to the backend. Each rule starts
// on a reset backend (Resetter) and ends with its instances deleted and
// the backend's Inventory no larger than it found it.
func Run(t *testing.T, cfg Config) {
	t.Helper()
	cfg = cfg.withDefaults(t)
	for _, r := range rules {
		if cfg.Rules != nil && !slices.Contains(cfg.Rules, r.name) {
			continue
		}
		t.Run(r.name, func(t *testing.T) {
			r.check(newEnv(t, cfg))
		})
	}
}

// RuleNames lists the subtest names Run uses, in order; the contract
// document's §11 table is checked against it.
func RuleNames() []string {
	names := make([]string, len(rules))
	for i, r := range rules {
		names[i] = r.name
	}
	return names
}
