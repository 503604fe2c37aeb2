package openstack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// classify maps an OpenStack error to its contract class (template entry
// 13). It is the only place that does.
func classify(err error) error {
	var code gophercloud.ErrUnexpectedResponseCode
	var reauth *gophercloud.ErrUnableToReauthenticate
	var fault *FaultError
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.As(err, &fault):
		switch {
		case fault.Capacity():
			return contract.Quota(err)
		case fault.BuildFailed:
			// The build was refused for what was asked (a flavor disk
			// smaller than the image, an image Nova cannot use, a port
			// that will not bind): the same request fails the same way.
			return contract.Permanent(err)
		}
		// A server that ran and then failed: the next Create makes a
		// fresh one.
		return err
	case errors.As(err, &reauth):
		// gophercloud's reauthentication error does not unwrap: its two
		// causes are classified here, the login's first.
		for _, cause := range []error{reauth.ErrReauth, reauth.ErrOriginal} {
			if c := contract.ClassOf(classify(cause)); c != contract.ClassTransient {
				return contract.Wrap(classOf(c), err)
			}
		}
		return err
	case isCertificateError(err):
		// Retrying cannot help until a person trusts the certificate.
		return contract.Permanent(err)
	case errors.As(err, &code):
		return classifyStatus(err, code)
	default:
		// Connection refused or reset, DNS, a lost response: transient.
		return err
	}
}

// quotaRE matches Nova's quota texts (nova.exception's QuotaError
// family): "Quota exceeded for instances: …" (TooManyInstances, 403, and
// 413 before the v2.1 API), "Maximum number of ports exceeded"
// (PortLimitExceeded), "Maximum number of metadata items exceeds 128"
// (MetadataLimitExceeded).
var quotaRE = regexp.MustCompile(`(?i)quota exceeded|maximum number of [a-z ]+ exceed`)

// exhaustedRE matches Neutron's answers when a network has no address
// left to give: 409 IpAddressGenerationFailure "No more IP addresses
// available on network …" (neutron/db/ipam_pluggable_backend.py) and 400
// ExternalIpAddressExhausted "Unable to find any IP address on external
// network …" (neutron/db/l3_db.py, a floating IP's create): capacity,
// which someone freeing an address clears.
var exhaustedRE = regexp.MustCompile(`No more IP addresses available on network|Unable to find any IP address on external network`)

// neverHealsRE matches the 409s that waiting does not clear (Nova Zed):
// a server someone locked (nova/compute/api.py check_instance_lock,
// InstanceIsLocked; only a person unlocks it), a security group name that
// matches several groups (nova/network/neutron.py, NoUniqueMatch) and
// more than one network to choose from (NetworkAmbiguous), both from
// servers.py create.
var neverHealsRE = regexp.MustCompile(`Instance [0-9a-f-]+ is locked|Multiple security groups found matching|More than one possible network found`)

func classifyStatus(err error, code gophercloud.ErrUnexpectedResponseCode) error {
	switch s := code.Actual; {
	case s == 404:
		return contract.NotFound(err)
	case s == 403 || s == 413:
		// 403 is a quota or a policy denial, 413 a quota (old Nova) or a
		// rate limit: the body tells which.
		if quotaRE.Match(code.Body) {
			return contract.Quota(err)
		}
		if s == 403 {
			return contract.Permanent(err)
		}
		return err
	case s == 401:
		// gophercloud logs in again on a 401 by itself; one that reaches
		// here is a credential Keystone refuses.
		return contract.Permanent(err)
	case (s == 400 || s == 409) && exhaustedRE.Match(code.Body):
		return contract.Quota(err)
	case s == 409 && quotaRE.Match(code.Body):
		// Neutron's OverQuota is a Conflict (neutron_lib/exceptions):
		// "Quota exceeded for resources: ['security_group']."
		return contract.Quota(err)
	case s == 409 && neverHealsRE.Match(code.Body):
		return contract.Permanent(err)
	case s == 409, s == 429, s >= 500:
		// A task in progress (InstanceInvalidState), a placement hiccup
		// (AllocationDeleteFailed), a rate limit, a server fault: all
		// pass.
		return err
	case s >= 400:
		// 400 (a request Nova's schema refuses, a flavor or image it
		// cannot find), 405, 406 (an unsupported microversion).
		return contract.Permanent(err)
	default:
		return err
	}
}

func classOf(c contract.Class) error {
	switch c {
	case contract.ClassNotFound:
		return contract.ErrNotFound
	case contract.ClassQuota:
		return contract.ErrQuota
	default:
		return contract.ErrPermanent
	}
}

// FaultError is a server that ended in ERROR, with Nova's fault: the
// asynchronous failure of a create, which no HTTP status reports.
type FaultError struct {
	ServerID string
	Fault    servers.Fault
	// BuildFailed tells that the server never launched: its build failed.
	BuildFailed bool
}

func (e *FaultError) Error() string {
	what := "is in ERROR"
	if e.BuildFailed {
		what = "failed to build"
	}
	return fmt.Sprintf("server %s %s: %s (Nova fault code %d)", e.ServerID, what, e.Fault.Message, e.Fault.Code)
}

// capacityRE matches the faults of a build the cloud had no room for
// (nova/exception.py): NoValidHost from the scheduler, NoMoreFixedIps (the
// subnet is full; the compute manager wraps it in BuildAbortException),
// and the quota texts. Every other fault of a build fails again the same
// way: BuildAbortException (a flavor disk or memory too small, an image
// not active or unacceptable, a network that cannot be allocated) and
// MaxRetriesExceeded, "Exceeded maximum number of retries. Exhausted all
// hosts available for retrying build failures" (conductor/manager.py),
// which is every host failing the build, not a want of room: on the
// OpenStack lane a port that would not bind (PortBindingFailed in the
// compute log) reached the user as exactly that.
var capacityRE = regexp.MustCompile(`No valid host was found|No fixed IP addresses available|` + quotaRE.String())

// Capacity tells whether the fault says the cloud has no room.
func (e *FaultError) Capacity() bool { return capacityRE.MatchString(e.Fault.Message) }

func isCertificateError(err error) bool {
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	var verify *tls.CertificateVerificationError
	return errors.As(err, &unknown) || errors.As(err, &invalid) || errors.As(err, &hostname) || errors.As(err, &verify)
}

// isStatus tells whether err is an API answer with the status.
func isStatus(err error, status int) bool { return gophercloud.ResponseCodeIs(err, status) }

// isUnauthenticated tells whether Keystone refused the credential.
func isUnauthenticated(err error) bool {
	var reauth *gophercloud.ErrUnableToReauthenticate
	return isStatus(err, 401) || errors.As(err, &reauth)
}
