package contract

import (
	"regexp"
	"strconv"
)

// dnsLabelRE is a DNS-1123 label. Names must be safe as a VM name, a
// hostname and a path segment on every backend; UIDs (RFC 4122 text, as
// Kubernetes writes them) must fit tag charsets that are narrow.
var dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// MaxReplica is the highest CreateRequest.Replica: a replica's index is
// written into marks (EgressKeeper), so it is bounded.
const MaxReplica = 255

// Validate checks the fields every provider needs in the same shape: Name,
// UID, Owner, Port, Replica and Network. Errors are ErrPermanent FieldErrors naming the field and the
// value. Placement and CloudInit are the provider's to validate against its
// catalogues and channel limits.
func (r CreateRequest) Validate() error {
	const label = "must be a DNS-1123 label: lowercase letters, digits and '-', at most 63 characters"
	switch {
	case !dnsLabelRE.MatchString(r.Name):
		return InvalidField("name", r.Name, label)
	case !dnsLabelRE.MatchString(r.UID):
		return InvalidField("uid", r.UID, label)
	case !dnsLabelRE.MatchString(r.Owner) || r.Owner == LegacyManagedValue:
		return InvalidField("owner", r.Owner, label+", not "+strconv.Quote(LegacyManagedValue))
	case r.Port < 1 || r.Port > 65535:
		return InvalidField("port", strconv.Itoa(int(r.Port)), "must be between 1 and 65535")
	case r.Replica < 0 || r.Replica > MaxReplica:
		return InvalidField("replica", strconv.Itoa(int(r.Replica)), "must be between 0 and "+strconv.Itoa(MaxReplica))
	case r.Network != nil:
		return r.Network.Validate()
	}
	return nil
}
