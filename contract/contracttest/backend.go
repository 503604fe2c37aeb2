package contracttest

import (
	"context"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// The capability interfaces a backend control may implement. Each puts the
// backend into a state the rules need and that only the backend (a
// simulator's control API, a fake's state, a real backend's admin API) can
// produce. A control that cannot do one leaves the interface out, and the
// rules that need it are skipped with the capability's name.

// GuestReporter plays the guest reporting its address, as the guest agent,
// VMware Tools or a DHCP lease would. Rules: RunningRequiresIP,
// OnlyRoutableIPv4, and every rule that needs a Running instance.
type GuestReporter interface {
	ReportIP(ctx context.Context, providerID, ip string) error
}

// NetworkReader reads back the static network the backend holds for the
// instance's guest, parsed from the form the guest reads it in (a NoCloud
// network-config, the VMware datasource's metadata, Proxmox's ipconfig0, a
// Neutron port's fixed IP). Rule: StaticAddressDelivered.
type NetworkReader interface {
	DeliveredNetwork(ctx context.Context, providerID string) (contract.StaticNetwork, error)
}

// StateInjector puts an instance into a backend state the provider's state
// table does not know. Rule: UnknownStateIsStopped.
type StateInjector interface {
	SetUnknownState(ctx context.Context, providerID string) error
}

// PowerOffer powers the instance off on the backend, as a person, a host's
// failure or the backend's own policy does, leaving it defined with its
// marks. Rule: PoweredOffIsStopped.
type PowerOffer interface {
	PowerOff(ctx context.Context, providerID string) error
}

// UnstartedCreator makes the instance req describes exactly as the provider
// would, marks included, but never starts it (a clone whose power-on never
// came, a defined domain). Rule: NeverStartedIsNeverStopped.
type UnstartedCreator interface {
	CreateUnstarted(ctx context.Context, req contract.CreateRequest) (providerID string, err error)
}

// Locker holds a backend lock or runs a long task on an instance until
// unlock is called. Rule: GetDuringLock.
type Locker interface {
	Lock(ctx context.Context, providerID string) (unlock func(), err error)
}

// DeleteStarter starts the instance's deletion on the backend and holds it
// in progress (deleting task, task_state deleting) until the returned
// function is called, which lets it finish. Rule: GetDuringDelete.
type DeleteStarter interface {
	BeginDelete(ctx context.Context, providerID string) (finish func(), err error)
}

// UnmarkedCreator makes an instance named name in the placement's location
// that carries none of the operator's marks, as a person or another tool
// would, and removes it again: the harness never asks the provider to
// delete what is not the operator's. DeleteUnmarked returns an error
// wrapping contract.ErrNotFound when the instance is already gone, which
// the harness reports as the provider having removed it. Rules:
// ListByTagExcludesUnmarked, CreateNeverAdoptsUnmarked.
type UnmarkedCreator interface {
	CreateUnmarked(ctx context.Context, name string, placement contract.Placement) (providerID string, err error)
	DeleteUnmarked(ctx context.Context, providerID string) error
}

// UIDMarkedCreator makes an instance named name in the placement's
// location that carries the UID mark valued uid and no managed mark, as a
// VM copied from one of the operator's with its managed mark taken off
// would: a provider that tells its instances by the UID mark alone takes
// it for the Proxy's. DeleteUnmarked (UnmarkedCreator) removes it. Rules:
// ListByTagExcludesUnmarked, CreateNeverAdoptsUnmarked (each checks this
// shape only with it).
type UIDMarkedCreator interface {
	CreateUIDMarked(ctx context.Context, name string, placement contract.Placement, uid string) (providerID string, err error)
}

// StrayEgressMaker keeps an egress address in region that carries the
// managed mark valued owner, and the UID mark valued uid when uid is not
// "", but no replica mark: an address another tool made with the
// operator's marks, or one copied from the operator's. It is no
// replica's: ListEgress must list the provider's own addresses beside it
// and never it, or the garbage collector would release it. release
// removes it again. Rule: EgressKeptPerReplica (this shape only with it).
type StrayEgressMaker interface {
	MakeStrayEgress(ctx context.Context, region, owner, uid string) (ip string, release func() error, err error)
}

// LegacyCreator makes the instance req describes as a provider of contract
// v0.2 and earlier did, before marks named their owner: every mark, with
// LabelManaged valued contract.LegacyManagedValue whatever req.Owner says,
// in the state the provider's Create leaves an instance. It plays an
// instance an older release of the operator made; the returned Instance
// needs only its ProviderID. Rules: ListByTagSeparatesOwners,
// CreateAdoptsAnyOwner (each checks the legacy case only with it).
type LegacyCreator interface {
	CreateLegacy(ctx context.Context, req contract.CreateRequest) (contract.Instance, error)
}

// Staller makes every backend call hang, until release is called or the
// call's own context ends. Rules: CancelledContextReturnsPromptly,
// CallsAreBounded.
type Staller interface {
	Stall() (release func())
}

// Holder is a Staller that says how many calls its stall holds now.
// With it, the racing Creates of ConcurrentCallsAreSafe start behind a
// stall and are let go together once each has reached the backend, so
// they overlap however loaded the machine is; without it, they overlap
// as the scheduler starts them. Gate implements Held.
type Holder interface {
	Staller
	Held() int
}

// ListingHolder holds the backend's listings, as a large folder or
// project takes a while to read: from HoldListings until release, every
// listing of a location the provider begins takes its snapshot and then
// waits. HeldListings is how many wait now; Listings counts the listings
// begun since the backend started. Rule: SharedListsAreFresh.
type ListingHolder interface {
	HoldListings() (release func())
	HeldListings() int
	Listings() int
}

// FaultInjector makes the backend fail like the real one does. Rules:
// ErrorsCarryTheirClass, CreateResumesAfterFailure, the sentinel rules.
type FaultInjector interface {
	// FailNext makes the next backend call that serves op fail with the
	// backend's own error of the given class: contract.ErrNotFound,
	// contract.ErrQuota, contract.ErrPermanent, or nil for a transient one.
	FailNext(op Op, class error) error
	// FailAfterCreate makes the next create leave its instance on the
	// backend and then fail transiently, as a power-on fault after a clone
	// or a connection cut after the create request.
	FailAfterCreate() error
}

// Op names the provider operation a fault targets.
type Op string

// The operations a FaultInjector can fail.
const (
	OpCreate Op = "create"
	OpGet    Op = "get"
	OpDelete Op = "delete"
	OpList   Op = "list"
)

// CredentialRejecter makes the backend reject the provider's credential
// (reject true) or accept it again (false), as disabling the account or
// revoking the key does: new logins fail and sessions or tokens already
// issued end too (or, where the backend checks only at connect, its access
// control refuses each call). Rules: SentinelCredential,
// RejectedCredentialIsNotGone.
type CredentialRejecter interface {
	RejectCredentials(reject bool)
}

// CredentialRejecterFrom makes the backend refuse the provider's
// credential from the n-th backend call from now on (1 is the next; calls
// counted as CallCounter counts them), until RejectCredentials(false) or
// Reset: a key revoked partway through an operation, so a rule plays the
// refusal on each call of a Delete, not on its first only. Rule:
// RejectedCredentialIsNotGone.
type CredentialRejecterFrom interface {
	RejectCredentialsFrom(n int) error
}

// UserDataReader returns the cloud-init user-data as the guest reads it.
// Rule: CloudInitByteForByte.
type UserDataReader interface {
	UserData(ctx context.Context, providerID string) ([]byte, error)
}

// CallCounter counts the backend calls the provider has made. Rules that
// check validation happens before any backend call use it, and CallCutter
// counts calls in the same unit.
type CallCounter interface {
	Calls() int
}

// CallCutter cuts one backend call the way a dropped connection or a
// crashed operator does. The n-th backend call from now (1 is the next;
// calls counted as CallCounter counts them) fails with the backend's
// transient error: before it takes effect (after false: the request never
// arrived) or after it took effect (after true: the backend did the work
// and the answer was lost). Rules: CreateResumesAfterFailure,
// DeleteResumesAfterFailure, which cut every call a Create or a Delete
// makes in turn.
//
// The rules count a Create's or Delete's calls once and then cut each
// number in turn, so the same operation must make the same calls every
// time: a control answers a task call only once the task has ended, for
// one, rather than letting the number of polls vary with timing.
//
// Answer the cut with an error status (a load balancer's 502), not by
// resetting the connection: Go's HTTP client silently retries an
// idempotent request (GET, HEAD) whose reused connection was reset, so
// the cut would never reach the provider.
type CallCutter interface {
	CutCall(n int, after bool) error
}

// CallFailer fails one backend call of an operation, not the first only:
// the n-th backend call from now (1 is the next; calls counted as
// CallCounter counts them) answers, before it takes effect, with the
// backend's own error of class (contract.ErrQuota or
// contract.ErrPermanent) for that call: a role that lacks the one
// privilege a volume's delete needs, a floating IP's quota reached after
// the server was made. Rule: ErrorsCarryTheirClass (its later-call
// shape).
type CallFailer interface {
	FailCall(n int, class error) error
}

// Resetter clears everything the control set up to misbehave — queued
// faults and cuts, stalls, rejected credentials, injected locks — so that
// each rule starts on a backend that behaves, whatever the rule before it
// left pending. Run calls it before every rule. Instances are not its
// business: the harness deletes what each rule made and checks the
// Inventory afterwards.
type Resetter interface {
	Reset()
}

// Inventory lists the resources a lifecycle makes and must remove again
// (instances, volumes, seed images, ports, tags), one string each, so a
// rule can tell what it left behind. It leaves out what is made once and
// shared by every instance (a base image cached in a pool) and the
// unmarked instances the control itself made. Rules: DeleteLeavesNothing,
// DeleteResumesAfterFailure, and the check every rule ends with.
type Inventory interface {
	Resources(ctx context.Context) ([]string, error)
}
