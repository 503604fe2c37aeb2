package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// rollChanged lets an edit of v1alpha1.RollAnnotation through the Proxy watch, which
// otherwise reacts to spec changes only.
var rollChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetAnnotations()[v1alpha1.RollAnnotation] != e.ObjectNew.GetAnnotations()[v1alpha1.RollAnnotation]
	},
}

// unknownCloudInit is the CloudInitHash of an instance made by a release
// that did not record one, from a cloud-init this release no longer renders.
const unknownCloudInit = "unknown"

// adoptLegacyHashes carries the instances a release before v0.3 recorded
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
func adoptLegacyHashes(proxy *v1alpha1.Proxy, hash string, cloudInit []byte, userCloudInit bool) {
	legacy := legacySpecHash(&proxy.Spec, cloudInit)
	s := &proxy.Status
	for _, ref := range []*v1alpha1.InstanceRef{s.Instance, s.Replacement} {
		if ref == nil || ref.CloudInitHash != "" {
			continue
		}
		switch {
		case ref.SpecHash == legacy:
			ref.SpecHash, ref.CloudInitHash = hash, replica.CloudInitHash(cloudInit)
		case ref == s.Instance && !userCloudInit && s.ObservedGeneration == proxy.Generation:
			ref.SpecHash, ref.CloudInitHash = hash, unknownCloudInit
		}
	}
}

// legacySpecHash is the spec hash of releases before v0.3, kept only to
// recognise the instances they recorded: the provider, placement and port,
// and the exact cloud-init bytes, rendered default included.
func legacySpecHash(spec *v1alpha1.ProxySpec, cloudInit []byte) string {
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

// noteCloudInit sets CloudInitCurrent: whether the serving instance was
// made with the cloud-init the operator would deliver today. False only
// ever comes from the operator's side (a new default template, an edited
// defaultAllowedClients, an instance from before v0.3): a change the user
// makes replaces the instance instead.
func (r *ProxyReconciler) noteCloudInit(proxy *v1alpha1.Proxy, cloudInit []byte) {
	inst := proxy.Status.Instance
	if inst == nil || inst.ProviderID == "" {
		return
	}
	if inst.CloudInitHash == replica.CloudInitHash(cloudInit) {
		replica.SetCondition(proxy, v1alpha1.ConditionCloudInitCurrent, true, v1alpha1.ReasonCloudInitCurrent,
			fmt.Sprintf("instance %s runs the cloud-init the operator renders today", inst.Name))
		return
	}
	replica.SetCondition(proxy, v1alpha1.ConditionCloudInitCurrent, false, v1alpha1.ReasonTemplateChanged,
		fmt.Sprintf("instance %s was made from a cloud-init the operator no longer renders (a new default template or defaultAllowedClients); it keeps serving: set the annotation %s to a new value to replace it", inst.Name, v1alpha1.RollAnnotation))
}
