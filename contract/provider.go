package contract

import (
	"context"
	"time"
)

// Provider creates, reads and deletes proxy instances on one configured
// backend. It must be safe for concurrent use: the operator runs up to
// limits.concurrency calls, a garbage-collection sweep and a check round at
// once (§1.3).
//
// No caller sets a deadline on ctx: the provider bounds every backend call
// itself (§1.5). Every method returns promptly once ctx is done, with an error
// that wraps ctx.Err() (transient, never one of the three named classes).
type Provider interface {
	// Create makes the instance described by req, or returns the one a
	// previous call already made.
	//
	// Create MUST validate req before any backend call: an unknown
	// Placement value, a malformed name or UID, or an undeliverable CloudInit
	// returns an error of class ErrPermanent whose text names the field and
	// the value (§2).
	//
	// Create MUST be idempotent (§4.1, §4.7): a repeat call with the same
	// Name and UID, from this or from a freshly started process, returns the
	// same instance and never makes a second one, even when the previous
	// call was cut off between any two of its steps. An existing instance
	// with the same name that does not carry LabelManaged (any value) and
	// this UID is never adopted: Create returns ErrPermanent naming the
	// collision (name-is-key) or ignores it (allocated-id).
	//
	// Create MUST mark the instance with LabelManaged (valued req.Owner) and
	// LabelUID (§8) and deliver req.CloudInit to the guest byte for byte
	// (§2).
	//
	// The returned Instance is in StateProvisioning or StateRunning. Quota
	// or capacity exhaustion returns ErrQuota; a request the backend will
	// never accept returns ErrPermanent.
	Create(ctx context.Context, req CreateRequest) (Instance, error)

	// Get reads the instance's current state from the backend.
	//
	// Get MUST return ErrPermanent for a malformed providerID (§6), before
	// any backend call, and ErrNotFound once the instance no longer exists.
	// While a delete is in progress Get returns StateTerminated or ErrNotFound;
	// while the backend holds a lock or runs a task on an instance that has
	// not yet run, Get returns StateProvisioning (§3, §4.6, §4.8).
	//
	// Get MUST read UID, Owner and CreatedAt back from the backend, not from
	// memory of an earlier Create (§8).
	Get(ctx context.Context, providerID string) (Instance, error)

	// Delete removes the instance and every secondary resource created for
	// it (§4.10).
	//
	// Delete MUST be idempotent: an instance that is already gone, or whose
	// deletion is already under way, returns nil without error. It MUST
	// return ErrPermanent for a malformed providerID, before any backend
	// call. A providerID whose location is no longer configured is a logged
	// no-op returning nil. Delete may return before the backend finishes
	// (delete-return: returns-early); Get then reports StateTerminated until
	// it reports ErrNotFound.
	Delete(ctx context.Context, providerID string) error

	// ListByTag returns every instance in the provider's whole scope (all
	// configured locations) whose mark key has exactly the given value; key
	// is LabelManaged (value: an Owner, or LegacyManagedValue) or LabelUID.
	// Instances without the mark, or with another value, MUST NOT be
	// returned; a LabelUID list returns the instance whatever its owner. Instances in StateTerminated may be. Filtering happens on the
	// backend where it can (§4.11).
	//
	// When part of the scope cannot be read, ListByTag either fails whole
	// (list-partial: fail-whole) or returns what it read together with an
	// error wrapping ErrPartialList (omit-unreachable), so the garbage
	// collector never mistakes an unreadable location for an empty one.
	ListByTag(ctx context.Context, key, value string) ([]Instance, error)
}

// CreateRequest describes one proxy instance (§2).
type CreateRequest struct {
	// Name is the deterministic instance name the operator derives from the
	// Proxy: a DNS-1123 label, at most 63 characters.
	Name string
	// UID is the owning Proxy's metadata.uid; it is written as LabelUID.
	UID string
	// Owner names the operator install and the provider entry making the
	// instance; it is written as the value of LabelManaged (§8). A DNS-1123
	// label, so it fits the same tag charsets as UID; the operator makes it
	// "<install>-<entry>". Two installs, or two entries, sharing one backend
	// have different Owners and never list each other's instances.
	Owner string
	// Placement says where and on what the instance runs.
	Placement Placement
	// CloudInit is the user-data, delivered to the guest byte for byte. It
	// is secret: never logged, never in an error, span or event (§12).
	CloudInit []byte
	// Port is the TCP port the proxy listens on. A provider that manages a
	// firewall opens it; others ignore it and say so in their guide.
	Port int32
	// Network, when set, is the instance's static address (§4.13): the
	// provider delivers it to the guest and reports exactly its IP. Nil
	// leaves the address to the backend (DHCP, Neutron's allocation).
	Network *StaticNetwork
	// Replica is the index of the Proxy's replica the instance serves, 0
	// for a Proxy of one. The instances made for one UID and Replica are
	// one replica over time (each replacement a new Name): a provider
	// that keeps a resource per replica across its instances (an egress
	// address, EgressKeeper) keys it by both.
	Replica int32
}

// Placement selects where and on what an instance runs. Region and Zone map
// to the backend's locations; MachineType and Image are keys of catalogues
// in the provider's config block. A provider MAY ignore a field if its guide
// says so (§2.1).
type Placement struct {
	Region      string
	Zone        string
	MachineType string
	Image       string
}

// Instance is what the backend says about one instance (§3).
type Instance struct {
	// ProviderID is the stable identifier Get and Delete take (§6).
	ProviderID string
	// Name is CreateRequest.Name as stored on the backend.
	Name string
	// State is the backend state mapped by the provider's state table.
	State State
	// IP is the routable IPv4 address clients use; required in StateRunning.
	IP string
	// EgressIP is the address the outside world sees the instance's
	// connections come from, when the backend translates them to one
	// kept for its replica (a floating IP: EgressKeeper, §3.1); "" when
	// the world sees IP, or the provider keeps none.
	EgressIP string
	// UID is the owning Proxy's UID read back from the instance's mark.
	UID string
	// Owner is the value of the instance's LabelManaged mark, read back:
	// the CreateRequest.Owner that made it, or LegacyManagedValue.
	Owner string
	// CreatedAt is when the instance was created, from the backend or from
	// a value written at create (created-at axis, §4.5).
	CreatedAt time.Time
	// Message is a short human-readable detail from the backend (a task's
	// failure, a fault), safe to show in status; empty when there is none.
	Message string
}
