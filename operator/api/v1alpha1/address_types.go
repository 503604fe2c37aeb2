package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The address API is shaped after Cluster API's IPAM contract (a pool, and
// one object per allocated address) and reuses the field names of its
// in-cluster provider's InClusterIPPool (addresses, prefix, gateway), so
// users of CAPV or CAPMOX recognise it; it lives in this operator's group,
// so it needs none of Cluster API's CRDs (docs/architecture.md).

// AddressPoolSpec declares the IPv4 addresses proxies of one provider entry
// may use, and the network they sit on.
type AddressPoolSpec struct {
	// Provider is the provider entry whose proxies use the pool.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Provider string `json:"provider"`
	// Region, when set, is the only placement region whose proxies may use
	// the pool (a network often exists in one region only).
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Region string `json:"region,omitempty"`
	// Addresses are the pool's addresses, each a range
	// ("192.0.2.10-192.0.2.20"), a CIDR ("192.0.2.64/28") or one address
	// ("192.0.2.5"), as in Cluster API's InClusterIPPool. The gateway, and
	// the network's own and broadcast addresses (of prefix), are never
	// handed out.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Addresses []PoolAddresses `json:"addresses"`
	// Prefix is the network's prefix length: the guests' netmask.
	// +kubebuilder:validation:Minimum=8
	// +kubebuilder:validation:Maximum=32
	Prefix int32 `json:"prefix"`
	// Gateway is the network's default route, inside the prefix.
	Gateway IPv4 `json:"gateway"`
	// DNS are the resolvers the guests use (at most 3); none leaves the
	// guest's own.
	// +kubebuilder:validation:MaxItems=3
	// +optional
	DNS []IPv4 `json:"dns,omitempty"`
	// AllowedNamespaces selects, by their labels, the namespaces whose
	// Proxies may draw addresses from the pool; a Proxy elsewhere is
	// refused (Ready False, reason NamespaceNotAllowed) before any address
	// or VM is made. Unset, every namespace may; {} selects every
	// namespace too. Set it: an address of a pool is what a partner
	// allow-lists, and this says which team may get one.
	// +optional
	AllowedNamespaces *metav1.LabelSelector `json:"allowedNamespaces,omitempty"`
}

// PoolAddresses is one entry of a pool's addresses: an IPv4 address, a
// CIDR, or a range "first-last" (first no greater than last; the controller
// checks that, CEL cannot compare addresses).
// +kubebuilder:validation:MaxLength=31
// +kubebuilder:validation:XValidation:rule="(isIP(self) && ip(self).family() == 4) || (isCIDR(self) && cidr(self).ip().family() == 4) || (self.split('-').size() == 2 && isIP(self.split('-')[0]) && ip(self.split('-')[0]).family() == 4 && isIP(self.split('-')[1]) && ip(self.split('-')[1]).family() == 4)",message="must be an IPv4 address (192.0.2.5), a CIDR (192.0.2.64/28) or a range (192.0.2.10-192.0.2.20)"
type PoolAddresses string

// IPv4 is an IPv4 address in dotted-quad form.
// +kubebuilder:validation:MaxLength=15
// +kubebuilder:validation:XValidation:rule="isIP(self) && ip(self).family() == 4",message="must be an IPv4 address such as 192.0.2.1"
type IPv4 string

// AddressPoolStatus counts the pool's addresses and says whether it may
// hand them out.
type AddressPoolStatus struct {
	// Total is how many addresses the pool hands out.
	// +optional
	Total int `json:"total"`
	// Allocated is how many are held by a ProxyAddress.
	// +optional
	Allocated int `json:"allocated"`
	// Free is Total minus Allocated.
	// +optional
	Free int `json:"free"`
	// Conditions: Valid (the controller could read every field, and no
	// older pool of the provider entry hands out any of its addresses:
	// reason PoolOverlaps names both pools and the range) and
	// AddressesUnique (no address of the pool is held twice among the
	// entry's ProxyAddresses).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// The metadata.name rule below runs on create only (optionalOldSelf: oldSelf has no
// value then): a rule on the root reads the whole object, so on an update
// it could never ratchet, and an object admitted before the rule could
// never have its status written or its finalizer removed. A name never
// changes, so create is the one moment to check it.

// AddressPool is a set of static IPv4 addresses for the proxies of one
// provider entry. An entry's pools must not overlap: of two that do, the
// younger is refused (Valid=False, PoolOverlaps). The name's 46-character
// bound dates from when it prefixed the ProxyAddresses' names.
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || self.metadata.name.matches('^[a-z]([-a-z0-9]{0,44}[a-z0-9])?$')",message="metadata.name must be a DNS label of at most 46 characters: it prefixes the names of the pool's ProxyAddresses",optionalOldSelf=true
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=egressproxies
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider`
// +kubebuilder:printcolumn:name="Free",type=integer,JSONPath=`.status.free`
// +kubebuilder:printcolumn:name="Allocated",type=integer,JSONPath=`.status.allocated`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AddressPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AddressPoolSpec   `json:"spec"`
	Status AddressPoolStatus `json:"status,omitempty"`
}

// AddressPoolList is a list of AddressPools.
// +kubebuilder:object:root=true
type AddressPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AddressPool `json:"items"`
}

// ProxyRef names the Proxy holding an address.
type ProxyRef struct {
	// Namespace is the Proxy's namespace.
	Namespace string `json:"namespace"`
	// Name is the Proxy's name.
	Name string `json:"name"`
	// UID tells this Proxy from a later one of the same name.
	UID string `json:"uid"`
}

// ProxyAddressSpec is one allocated address: Cluster API's IPAddress, with
// the claim replaced by the Proxy and its replica.
type ProxyAddressSpec struct {
	// Pool is the AddressPool the address comes from.
	Pool string `json:"pool"`
	// Provider is the pool's provider entry at allocation, so the garbage
	// collector knows which backend to ask whether a VM still holds it.
	Provider string `json:"provider"`
	// Address is the IPv4 address with the network's prefix length, such
	// as 192.0.2.10/24.
	Address string `json:"address"`
	// Gateway is the pool's gateway at allocation.
	Gateway string `json:"gateway"`
	// DNS are the pool's resolvers at allocation.
	// +optional
	DNS []string `json:"dns,omitempty"`
	// Proxy holds the address.
	Proxy ProxyRef `json:"proxy"`
	// Replica is the index of the Proxy's replica the address is for.
	// +optional
	Replica int32 `json:"replica"`
}

// ProxyAddress is one address of a pool held by one Proxy. Creating it is
// the allocation: its name is the provider entry's and the address's
// (<provider>-a-b-c-d), so the API server refuses a second holder, from
// any pool of the entry. It is deleted once no VM holds the address.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=egressproxies
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.address`
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.spec.pool`
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.proxy.namespace`
// +kubebuilder:printcolumn:name="Proxy",type=string,JSONPath=`.spec.proxy.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ProxyAddress struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a ProxyAddress cannot change: delete it to release the address"
	Spec ProxyAddressSpec `json:"spec"`
}

// ProxyAddressList is a list of ProxyAddresses.
// +kubebuilder:object:root=true
type ProxyAddressList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProxyAddress `json:"items"`
}
