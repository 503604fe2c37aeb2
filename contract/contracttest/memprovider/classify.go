package memprovider

import (
	"errors"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// classify maps a Cloud error to its contract class (template entry 13).
// It is the only place that does; errors without an APIError (a done
// context, a transport failure) stay transient.
func classify(err error) error {
	var api *APIError
	if !errors.As(err, &api) {
		return err
	}
	switch {
	case api.Status == 404:
		return contract.NotFound(err)
	case api.Status == 403 && api.Code == "quota_exceeded", api.Status == 507:
		return contract.Quota(err)
	case api.Status == 400, api.Status == 401, api.Status == 403, api.Status == 413:
		// 401: the token is wrong or expired; retrying it cannot help until
		// the credential is rotated, which the operator notices on its own.
		return contract.Permanent(err)
	default:
		// 409 (locked, name taken, deleting), 429 and 5xx: the same call
		// succeeds later.
		return err
	}
}
