package proxy

import (
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

// noteCloudInit sets CloudInitCurrent: whether the serving instance was
// made with the cloud-init the operator would deliver today. False only
// ever comes from the operator's side (a new default template, an edited
// defaultAllowedClients, an instance from before v0.3): a change the user
// makes replaces the instance instead.
func (r *Reconciler) noteCloudInit(proxy *v1alpha1.Proxy, cloudInit []byte) {
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
