package contract

import (
	"context"
	"strconv"
)

// EgressKeeper is implemented by a Provider that gives each replica of a
// Proxy an egress address of its own, kept across the replica's instances:
// the address the outside world sees its connections come from, which a
// partner allow-lists, and which a replacement must keep (a floating IP on
// OpenStack, docs/openstack-provider.md). It is optional, like Checker: the
// operator type-asserts it on the provider it built from the config (§3.1).
//
// Such a provider, when KeepsEgress is true, MUST report the replica's
// egress address as Instance.EgressIP of every Running instance Create and
// Get return; MUST give every instance made for one UID and
// Replica the same address for as long as it is kept, whatever was deleted
// in between, and different replicas different addresses; and MUST keep it
// until ReleaseEgress releases it: Delete never does. A cut-off Create
// leaves no address that ListEgress does not return.
type EgressKeeper interface {
	// KeepsEgress reports whether the provider's config gives replicas
	// egress addresses; a wrapper answers for the provider it wraps.
	KeepsEgress() bool
	// ListEgress returns every egress address kept for owner (a
	// CreateRequest.Owner) in the provider's whole scope, so the garbage
	// collector finds those of Proxies that are gone. It fails whole when
	// part of the scope cannot be read.
	ListEgress(ctx context.Context, owner string) ([]Egress, error)
	// ReleaseEgress releases the address kept for e.UID and e.Replica in
	// e.Region (returns it to the backend, or to the config's set). It is
	// idempotent: nil when nothing is kept. The operator calls it once no
	// instance of the replica is left: when the Proxy is deleted, the
	// replica scaled away, or the GC finds its Proxy gone.
	ReleaseEgress(ctx context.Context, e Egress) error
}

// Egress is one kept egress address.
type Egress struct {
	// Region is the Placement.Region it was kept in.
	Region string
	// UID and Replica are those of the CreateRequests it serves.
	UID     string
	Replica int32
	// Owner is the CreateRequest.Owner that made it.
	Owner string
	// IP is the address.
	IP string
}

// Validate checks what a provider pastes into a backend filter: UID and
// Replica, as CreateRequest.Validate does. Errors are ErrPermanent
// FieldErrors naming the field and the value.
func (e Egress) Validate() error {
	switch {
	case !dnsLabelRE.MatchString(e.UID):
		return InvalidField("uid", e.UID, "must be a DNS-1123 label: lowercase letters, digits and '-', at most 63 characters")
	case e.Replica < 0 || e.Replica > MaxReplica:
		return InvalidField("replica", strconv.Itoa(int(e.Replica)), "must be between 0 and "+strconv.Itoa(MaxReplica))
	}
	return nil
}
