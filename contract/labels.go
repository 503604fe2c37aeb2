package contract

import "time"

// The garbage-collection marks (§8). Every instance a provider creates
// carries both; how they are stored (native labels or tags, written
// metadata) is the provider's gc-mark profile (§4.4). A backend whose tag
// charset cannot hold these keys maps them, and its guide says how; the
// values below are what ListByTag's key and value arguments carry.
const (
	// LabelManaged marks an instance as created by this operator; its value
	// is CreateRequest.Owner, which names the install and the provider entry
	// that made it, so installs and entries sharing one backend each see
	// only their own instances.
	LabelManaged = "egressproxies.io/managed"
	// LabelUID carries the owning Proxy's metadata.uid.
	LabelUID = "egressproxies.io/proxy-uid"
	// LabelReplica carries CreateRequest.Replica, in decimal, on what a
	// provider keeps per replica across its instances (an egress address,
	// EgressKeeper); instances need not carry it.
	LabelReplica = "egressproxies.io/replica"
	// LegacyManagedValue is the value of LabelManaged on instances made
	// under contract v0.2 and earlier, before marks named their owner. It
	// says nothing about which install made the instance: the operator acts
	// on such an instance only when its LabelUID names one of its Proxies.
	LegacyManagedValue = "true"
)

// DefaultMinAge is the age below which the garbage collector never deletes
// an instance, whatever its marks say, unless the provider's config sets
// gc.minAge. It covers the time between a Create and the status write that
// records it, and any mark window (§8): a provider whose marks are written
// after the instance exists must keep that window far below MinAge.
const DefaultMinAge = 15 * time.Minute
