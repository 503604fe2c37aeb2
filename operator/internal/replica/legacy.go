package replica

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// Hashes recorded by releases before v0.3, carried over without replacing
// a VM (docs/operator.md, "Upgrades").

// UnknownCloudInit is the CloudInitHash of an instance made by a release
// that did not record one, from a cloud-init this release no longer renders.
const UnknownCloudInit = "unknown"

// AdoptLegacyHashes carries the instances a release before v0.3 recorded
// (no CloudInitHash; a spec hash that covered the rendered cloud-init)
// over to this release's hashes without replacing them, unless the user's
// intent changed:
//
//   - a hash the old rule gives for today's spec and cloud-init: nothing
//     changed at all;
//   - a serving instance of a Proxy with the default cloud-init whose spec
//     is still the one the old release last reconciled (observedGeneration):
//     only the operator's rendering changed, which never replaces a VM; the
//     instance is marked as made from an unknown cloud-init, so
//     CloudInitCurrent is False until the user rolls it.
//
// Anything else (the spec, or a user-supplied cloud-init, changed while the
// operator was being upgraded) keeps its old hash, and the ordinary
// replacement follows.
func AdoptLegacyHashes(proxy *v1alpha1.Proxy, hash string, cloudInit []byte, userCloudInit bool) {
	legacy := LegacySpecHash(&proxy.Spec, cloudInit)
	s := &proxy.Status
	for _, ref := range []*v1alpha1.InstanceRef{s.Instance, s.Replacement} {
		if ref == nil || ref.CloudInitHash != "" {
			continue
		}
		switch {
		case ref.SpecHash == legacy:
			ref.SpecHash, ref.CloudInitHash = hash, CloudInitHash(cloudInit)
		case ref == s.Instance && !userCloudInit && s.ObservedGeneration == proxy.Generation:
			ref.SpecHash, ref.CloudInitHash = hash, UnknownCloudInit
		}
	}
}

// LegacySpecHash is the spec hash of releases before v0.3, kept only to
// recognise the instances they recorded: the provider, placement and port,
// and the exact cloud-init bytes, rendered default included.
func LegacySpecHash(spec *v1alpha1.ProxySpec, cloudInit []byte) string {
	h := sha256.New()
	fields, _ := json.Marshal(struct {
		Provider  string
		Placement v1alpha1.Placement
		Port      int32
	}{spec.Provider, spec.Placement, spec.Port})
	h.Write(fields)
	h.Write([]byte{0})
	h.Write(cloudInit)
	return hex.EncodeToString(h.Sum(nil))[:16]
}
