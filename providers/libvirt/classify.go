package libvirt

import (
	"context"
	"errors"
	"strings"

	"libvirt.org/go/libvirt"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// classify maps a libvirt error to its contract class by its code
// (template entry 13, error-code). It is the only place that does.
func classify(err error) error {
	var le libvirt.Error
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case !errors.As(err, &le):
		return err
	}
	switch le.Code {
	case libvirt.ERR_NO_DOMAIN, libvirt.ERR_NO_STORAGE_VOL:
		return contract.NotFound(err)
	case libvirt.ERR_SYSTEM_ERROR, libvirt.ERR_INTERNAL_ERROR, libvirt.ERR_OPERATION_FAILED, libvirt.ERR_NO_MEMORY:
		if isExhausted(le.Message) {
			return contract.Quota(err)
		}
		return err
	case libvirt.ERR_AUTH_FAILED, libvirt.ERR_AUTH_CANCELLED, libvirt.ERR_AUTH_UNAVAILABLE,
		libvirt.ERR_ACCESS_DENIED, libvirt.ERR_OPERATION_DENIED,
		libvirt.ERR_XML_ERROR, libvirt.ERR_XML_DETAIL, libvirt.ERR_INVALID_ARG,
		libvirt.ERR_CONFIG_UNSUPPORTED, libvirt.ERR_NO_SUPPORT, libvirt.ERR_OPERATION_UNSUPPORTED,
		libvirt.ERR_NO_STORAGE_POOL, libvirt.ERR_NO_NETWORK:
		// Retrying cannot help until a person fixes the credential, the
		// grant, the config (a pool or network that does not exist) or
		// the host (a domain type it cannot run).
		return contract.Permanent(err)
	default:
		// ERR_OPERATION_INVALID (a state race: already running, not
		// running), ERR_OPERATION_TIMEOUT (a job holds the domain's
		// state lock), ERR_NO_CONNECT, ERR_RPC, ERR_AGENT_UNRESPONSIVE,
		// ERR_STORAGE_VOL_EXIST and ERR_DOM_EXIST (a racing Create:
		// resumed), ERR_RESOURCE_BUSY.
		return err
	}
}

// isExhausted reports whether a system error's text is out of space or
// memory: libvirt has no quota of its own, so a full pool (ENOSPC) or a
// host out of memory for QEMU (ENOMEM) is its quota.
func isExhausted(msg string) bool {
	return strings.Contains(msg, "No space left on device") || strings.Contains(msg, "Cannot allocate memory") ||
		strings.Contains(msg, "Disk quota exceeded")
}

func code(err error) libvirt.ErrorNumber {
	var le libvirt.Error
	if errors.As(err, &le) {
		return le.Code
	}
	return libvirt.ERR_OK
}

func isNotFound(err error) bool { return errors.Is(err, contract.ErrNotFound) }

// isExists: a name already taken, by a racing Create or a leftover.
// libvirt reports a redefined domain name as ERR_OPERATION_FAILED
// ("domain 'x' already exists with uuid …").
func isExists(err error) bool {
	c := code(err)
	var le libvirt.Error
	_ = errors.As(err, &le)
	return c == libvirt.ERR_STORAGE_VOL_EXIST || c == libvirt.ERR_DOM_EXIST ||
		c == libvirt.ERR_OPERATION_FAILED && strings.Contains(le.Message, "already exists")
}

// isInvalidState: the domain is not in the state the call needs (start of
// a running domain, destroy of a stopped one).
func isInvalidState(err error) bool { return code(err) == libvirt.ERR_OPERATION_INVALID }

// isConnectionLost: the connection is broken; do opens a new one.
func isConnectionLost(err error) bool {
	switch code(err) {
	case libvirt.ERR_NO_CONNECT, libvirt.ERR_INVALID_CONN, libvirt.ERR_RPC:
		return true
	case libvirt.ERR_INTERNAL_ERROR:
		var le libvirt.Error
		_ = errors.As(err, &le)
		return strings.Contains(le.Message, "client socket is closed")
	}
	return false
}
