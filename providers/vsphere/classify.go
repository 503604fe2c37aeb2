package vsphere

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// classify maps a vSphere error to its contract class (template entry 13).
// It is the only place that does.
func classify(err error) error {
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case isNotFound(err):
		return contract.NotFound(err)
	case fault.Is(err, &types.InsufficientResourcesFault{}), fault.Is(err, &types.NotEnoughLicenses{}), fault.Is(err, &types.NoDiskSpace{}):
		return contract.Quota(err)
	case fault.Is(err, &types.NoPermission{}), fault.Is(err, &types.InvalidLogin{}), fault.Is(err, &types.InvalidArgument{}),
		fault.Is(err, &types.InvalidName{}), isCertificateError(err):
		// Retrying cannot help until a person grants the privilege, fixes
		// the credential or trusts the certificate.
		return contract.Permanent(err)
	default:
		// NotAuthenticated (an expired session: do logs in again),
		// TaskInProgress, ConcurrentAccess, HostCommunication,
		// DuplicateName (a racing clone: Create resumes it), network
		// errors.
		return err
	}
}

func isNotFound(err error) bool {
	var nf *find.NotFoundError
	return errors.As(err, &nf) || fault.Is(err, &types.ManagedObjectNotFound{})
}

func isNotAuthenticated(err error) bool { return fault.Is(err, &types.NotAuthenticated{}) }
func isDuplicateName(err error) bool    { return fault.Is(err, &types.DuplicateName{}) }
func isAlreadyOn(err error) bool        { return fault.Is(err, &types.InvalidPowerState{}) }
func isAlreadyOff(err error) bool       { return fault.IsAlreadyPoweredOffError(err) || isAlreadyOn(err) }

func isCertificateError(err error) bool {
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	var verify *tls.CertificateVerificationError
	return errors.As(err, &unknown) || errors.As(err, &invalid) || errors.As(err, &hostname) || errors.As(err, &verify)
}
