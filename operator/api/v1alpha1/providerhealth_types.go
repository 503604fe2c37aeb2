package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProviderCheck is the outcome of one check target.
type ProviderCheck struct {
	// Target names what was checked: credentials, a location, an image.
	Target string `json:"target"`
	// OK is true when the target works.
	OK bool `json:"ok"`
	// Reason is a shared reason (OK, Unauthenticated, Forbidden, NotFound,
	// QuotaExceeded, Unreachable, Timeout, Misconfigured, BackendError,
	// NotChecked) or one the provider's spec documents.
	Reason string `json:"reason"`
	// Message says what failed.
	// +optional
	Message string `json:"message,omitempty"`
	// Details are facts about the target; the keys are the provider's.
	// +optional
	Details map[string]string `json:"details,omitempty"`
	// LastCheckTime is when the target was last checked.
	LastCheckTime metav1.Time `json:"lastCheckTime"`
	// LastTransitionTime is when OK last changed.
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
}

// ProviderHealthStatus is the last check round's result.
type ProviderHealthStatus struct {
	// Type is the provider's type: memory, vsphere, proxmox, libvirt or
	// openstack.
	// +optional
	Type string `json:"type,omitempty"`
	// Owner is the value of the managed mark (egressproxies.io/managed) on
	// every instance this entry creates: "<installID>-<entry>". The entry's
	// garbage collector considers only instances carrying it.
	// +optional
	Owner string `json:"owner,omitempty"`
	// Checks has one entry per check target, in the provider's order.
	// +listType=map
	// +listMapKey=target
	// +optional
	Checks []ProviderCheck `json:"checks,omitempty"`
	// Conditions: Ready is true when every check is OK.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ProviderHealth says whether one configured provider works. The operator
// creates one per provider in its config, named after it, and deletes it
// when the provider leaves the config.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=egressproxies
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.status.type`
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.status.owner`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ProviderHealth struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status ProviderHealthStatus `json:"status,omitempty"`
}

// ProviderHealthList is a list of ProviderHealths.
// +kubebuilder:object:root=true
type ProviderHealthList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProviderHealth `json:"items"`
}
