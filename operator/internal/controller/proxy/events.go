package proxy

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// The events the Proxy reconciler records, one constructor each, so that a
// reason is spelled once and the shape of its note is in one place. A note
// never holds CloudInit or a credential.

// proxyEvent is one event on a Proxy.
type proxyEvent struct {
	eventType, reason, action, note string
}

// record records e on the Proxy.
func (r *Reconciler) record(proxy *v1alpha1.Proxy, e proxyEvent) {
	if r.Recorder != nil {
		r.Recorder.Eventf(proxy, nil, e.eventType, e.reason, e.action, "%s", e.note)
	}
}

func normal(reason, action, note string) proxyEvent {
	return proxyEvent{corev1.EventTypeNormal, reason, action, note}
}

func warning(reason, action, note string) proxyEvent {
	return proxyEvent{corev1.EventTypeWarning, reason, action, note}
}

// instanceCreated: a Create returned the instance; of names the replica.
func instanceCreated(name, providerID, of string) proxyEvent {
	return normal("Created", "Create", fmt.Sprintf("created instance %s (%s)%s", name, providerID, of))
}

// instanceDeleted: the instance is gone; detail says what it was, and
// tail, if any, why.
func instanceDeleted(action, name, detail, tail string) proxyEvent {
	return normal("Deleted", action, fmt.Sprintf("deleted instance %s (%s)%s", name, detail, tail))
}

// instanceDeleting: the Proxy's deletion deletes the instance.
func instanceDeleting(name, providerID string) proxyEvent {
	return normal("Deleted", "Delete", fmt.Sprintf("deleting instance %s (%s)", name, providerID))
}

// deleteFailed: a VM was left to the garbage collector.
func deleteFailed(action, note string) proxyEvent { return warning("DeleteFailed", action, note) }

// notOwned: the instance does not carry the Proxy's UID, and is left alone.
func notOwned(action, msg string) proxyEvent {
	return warning(v1alpha1.ReasonInstanceNotOwned, action, msg)
}

// instanceGone and instanceStopped: the VM went behind the operator's back.
func instanceGone(msg string) proxyEvent {
	return warning(v1alpha1.ReasonInstanceGone, "Recreate", msg)
}
func instanceStopped(msg string) proxyEvent {
	return warning(v1alpha1.ReasonInstanceStopped, "Recreate", msg)
}

// replacing: a spec change replaces the instance.
func replacing(old, next, of string) proxyEvent {
	return normal(v1alpha1.ReasonReplacing, "Replace", fmt.Sprintf("spec changed: replacing instance %s with %s%s", old, next, of))
}

// replaced: the replacement serves (what: "" or " replica k"); the old
// instance goes.
func replaced(name, ip, what, old string) proxyEvent {
	return normal("Replaced", "Replace", fmt.Sprintf("instance %s (%s) now serves%s; deleting %s", name, ip, what, old))
}

// answers: who ("proxy", "replica k") answers at ip:port.
func answers(who, ip string, port int32) proxyEvent {
	return normal(v1alpha1.ReasonReady, "Serve", fmt.Sprintf("%s answers at %s:%d", who, ip, port))
}

// replicaRemoved: a scaled-away replica's VMs are gone.
func replicaRemoved(k int) proxyEvent {
	return normal("ReplicaRemoved", "ScaleDown", fmt.Sprintf("replica %d removed: its VMs are gone, its address is released", k))
}

// egressReleased: the provider no longer keeps the replica's egress
// address; action is ScaleDown or Delete.
func egressReleased(action string, e contract.Egress) proxyEvent {
	return normal("EgressReleased", action, fmt.Sprintf("released egress address %s of replica %d", e.IP, e.Replica))
}

// serviceUnavailable and serviceConflict: the Proxy cannot be published.
func serviceUnavailable(err error) proxyEvent {
	return warning(v1alpha1.ReasonServiceUnavailable, "Serve", err.Error())
}
func serviceConflict(msg string) proxyEvent {
	return warning(v1alpha1.ReasonServiceConflict, "Serve", msg)
}

// cloudInitForbidden and cloudInitUnavailable: the cloud-init Secret
// cannot be read.
func cloudInitForbidden(msg string) proxyEvent {
	return warning(v1alpha1.ReasonCloudInitForbidden, "ReadCloudInit", msg)
}
func cloudInitUnavailable(err error) proxyEvent {
	return warning(v1alpha1.ReasonCloudInitUnavailable, "ReadCloudInit", err.Error())
}

// providerNotConfigured: the Proxy's provider entry is not in the config.
func providerNotConfigured(action, msg string) proxyEvent {
	return warning(v1alpha1.ReasonProviderNotConfigured, action, msg)
}

// refused: the operator will not provision the Proxy (refusal).
func refused(reason, msg string) proxyEvent { return warning(reason, "Validate", msg) }

// providerFailed: a quota or permanent error of operation op.
func providerFailed(reason, op, msg string) proxyEvent { return warning(reason, op, msg) }
