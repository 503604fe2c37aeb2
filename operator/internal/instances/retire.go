package instances

import (
	"context"
	"errors"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Retired is what Retire did.
type Retired struct {
	// Deleted says the instance was deleted.
	Deleted bool
	// Other is the instance found under the providerID when it carries
	// another Proxy's UID: left alone.
	Other *contract.Instance
	// Failed names the call that failed (Get or Delete), and Err says why.
	Failed string
	Err    error
}

// Retire deletes the instance providerID of the Proxy of UID uid that the
// Proxy no longer wants, after drain (a VM that served through the
// Service lets its clients leave first). It reads the instance back before
// the Delete, since a providerID is the backend's key and may name another
// Proxy's VM by then; one gone already is done. A drain cut short by ctx
// does nothing.
func Retire(ctx context.Context, prov contract.Provider, uid, providerID string, drain time.Duration) Retired {
	if !sleep(ctx, drain) {
		return Retired{}
	}
	inst, err := prov.Get(ctx, providerID)
	switch {
	case errors.Is(err, contract.ErrNotFound):
		logf.FromContext(ctx).Info("the retired instance is gone already", "providerID", providerID)
		return Retired{}
	case err != nil:
		return Retired{Failed: "Get", Err: err}
	case !CarriesUID(inst, uid):
		return Retired{Other: &inst}
	}
	if err := prov.Delete(ctx, providerID); err != nil {
		return Retired{Failed: "Delete", Err: err}
	}
	return Retired{Deleted: true}
}

// sleep waits d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
