package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProxySpec is what the user asks for: a forward proxy on a configured
// provider.
// +kubebuilder:validation:XValidation:rule="!has(self.addresses) || size(self.addresses) == 0 || (has(self.addressPool) && size(self.addressPool) > 0)",message="addresses pins addresses of a pool: set addressPool too"
// +kubebuilder:validation:XValidation:rule="!has(self.addresses) || size(self.addresses) <= (has(self.replicas) ? self.replicas : 1)",message="addresses pins one address per replica: at most spec.replicas of them",fieldPath=".addresses"
// +kubebuilder:validation:XValidation:rule="!has(self.egress) || !has(self.cloudInit)",message="egress is rendered into the default cloud-init: with cloudInit the proxy's configuration is yours, so write its destination rules there",fieldPath=".egress"
type ProxySpec struct {
	// Provider is the name of a provider in the operator's providers config.
	// It cannot change: to move a proxy to another backend, create a new
	// Proxy.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="provider is immutable; create a new Proxy to use another provider"
	Provider string `json:"provider"`

	// Placement says where and on what the VM runs; each field is a key the
	// provider's config knows (a region, a zone, a machine-type or image
	// catalogue key). Empty fields take the provider's default where it has
	// one. A change replaces the VM.
	// +optional
	Placement Placement `json:"placement,omitempty"`

	// Replicas is how many VMs serve the proxy, each with its own address
	// (of spec.addressPool when set); the Service sends clients to every
	// one that answers. A change adds the highest indexes or removes them,
	// and replaces none of the others. A spec change replaces the replicas
	// one at a time.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// Port is the TCP port the proxy listens on.
	// +kubebuilder:default=3128
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// AllowedClients are the networks allowed to use the proxy, as CIDRs.
	// Empty means the cluster's pod and node ranges the operator is
	// configured with. A proxy is never open to the world: a /0 is refused.
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +optional
	AllowedClients []CIDR `json:"allowedClients,omitempty"`

	// Egress is what the proxy lets its clients reach: a request to any
	// other host, network or port is refused with a 403 that names the
	// Proxy. Unset: any destination on any port, as before egress
	// existed. Set it: an allow-listed address is only as narrow as what
	// goes out through it. Rendered into the default cloud-init (not with
	// cloudInit); a change replaces the VMs one at a time.
	// +optional
	Egress *Egress `json:"egress,omitempty"`

	// CloudInit, when set, names a Secret key whose content is the VM's
	// cloud-init user-data, passed byte for byte; the user then owns the
	// proxy's configuration. When unset, the operator renders the default
	// proxy cloud-init from port and allowedClients.
	// +optional
	CloudInit *corev1.SecretKeySelector `json:"cloudInit,omitempty"`

	// AddressPool names the AddressPool the proxy's static address comes
	// from; it is allocated before the VM is made and shown in
	// status.addresses. Unset: the backend assigns the address (DHCP), and
	// it changes when the VM is replaced. A change allocates from the new
	// pool and replaces the VM.
	// +kubebuilder:validation:MaxLength=46
	// +optional
	AddressPool string `json:"addressPool,omitempty"`

	// Addresses pins the proxy's addresses to these of the pool, one per
	// replica in index order (addresses[i] is replica i's; replicas beyond
	// the list take any free address): the way to keep an address across
	// a delete and recreate of the Proxy, as GitOps does. Unset: any free
	// address.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	Addresses []IPv4 `json:"addresses,omitempty"`
}

// CIDR is an IPv4 network of /8 or longer, or an IPv6 network of /7 or
// longer, in CIDR notation. With at most 64 of them, allowedClients can
// then never cover all of IPv4 (64 × 2^24 addresses is a quarter of it) or
// all of IPv6 (64 × 2^121 is half), however they are split: a proxy is
// never open to the world. The bounds still admit every private range
// (10.0.0.0/8, fc00::/7).
// +kubebuilder:validation:MaxLength=43
// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="must be a CIDR such as 10.0.0.0/8"
// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || cidr(self).prefixLength() >= (cidr(self).ip().family() == 4 ? 8 : 7)",message="an IPv4 network must be /8 or longer and an IPv6 one /7 or longer, so that allowedClients can never open the proxy to all of IPv4 or IPv6; list the client networks instead"
type CIDR string

// Egress is what a proxy lets out (docs/egress.md).
type Egress struct {
	// Destinations are the hosts and networks the proxy may reach; a
	// request is let through when one of them matches its host and port.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	Destinations []Destination `json:"destinations"`
}

// Destination is a host or an IPv4 network, and the ports the proxy may
// reach it on.
// +kubebuilder:validation:XValidation:rule="has(self.host) != has(self.network)",message="set one of host and network"
type Destination struct {
	// Host is a DNS name such as api.partner.example, or "*." and a name
	// for every name below it: *.partner.example matches
	// api.partner.example and a.b.partner.example, not partner.example.
	// Lower case; an address is a network (a /32).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^(\*\.)?[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="!isIP(self)",message="an address: list it as network, a /32"
	// +optional
	Host string `json:"host,omitempty"`
	// Network is an IPv4 network in CIDR notation, by its first address
	// (203.0.113.0/24; one address is a /32). tinyproxy matches it
	// against an address written in the request; squid also against the
	// addresses a requested name resolves to.
	// +kubebuilder:validation:MaxLength=18
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self).ip().family() == 4 && cidr(self).prefixLength() >= 1 && string(cidr(self).masked()) == self",message="must be an IPv4 network by its first address, /1 to /32, such as 203.0.113.0/24; to let out any destination leave spec.egress unset"
	// +optional
	Network string `json:"network,omitempty"`
	// Ports are the ports the proxy may reach the destination on, by
	// plain HTTP or CONNECT. Unset: 80 for plain HTTP and 443 for CONNECT
	// (HTTPS).
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=65535
	// +listType=set
	// +optional
	Ports []int32 `json:"ports,omitempty"`
}

// Placement selects where and on what a proxy's VM runs.
// +kubebuilder:validation:XValidation:rule="!has(self.zones) || size(self.zones) == 0 || !has(self.zone) || size(self.zone) == 0",message="zone and zones are mutually exclusive: zones spreads the replicas, zone puts them all in one place",fieldPath=".zones"
type Placement struct {
	// Region is the provider's location: a datacenter, a host, a region.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +optional
	Region string `json:"region,omitempty"`
	// Zone is a location inside the region: a cluster, a node, an
	// availability zone.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +optional
	Zone string `json:"zone,omitempty"`
	// Zones spreads the replicas: replica i runs in zones[i mod len(zones)].
	// The operator cannot list a provider's zones, so the spread is this
	// explicit list. Mutually exclusive with zone; a change replaces the
	// replicas whose zone it changes.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +listType=atomic
	// +optional
	Zones []string `json:"zones,omitempty"`
	// MachineType is a key of the provider's machine-type catalogue.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +optional
	MachineType string `json:"machineType,omitempty"`
	// Image is a key of the provider's image catalogue.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +optional
	Image string `json:"image,omitempty"`
}

// ProxyPhase is a one-word summary of a Proxy's state.
// +kubebuilder:validation:Enum=Pending;Provisioning;Ready;Replacing;Failed;Deleting
type ProxyPhase string

// The phases of a Proxy.
const (
	PhasePending      ProxyPhase = "Pending"
	PhaseProvisioning ProxyPhase = "Provisioning"
	PhaseReady        ProxyPhase = "Ready"
	PhaseReplacing    ProxyPhase = "Replacing"
	PhaseFailed       ProxyPhase = "Failed"
	PhaseDeleting     ProxyPhase = "Deleting"
)

// InstanceRef records one VM the operator made for a Proxy.
type InstanceRef struct {
	// Name is the instance name, derived from the Proxy and its spec hash.
	Name string `json:"name"`
	// ProviderID identifies the VM on the provider; empty until Create
	// returned.
	// +optional
	ProviderID string `json:"providerID,omitempty"`
	// SpecHash is the hash of what the user asked the VM to be made from:
	// the spec, a user-supplied cloud-init and the roll annotation. The
	// operator's default template is not part of it.
	SpecHash string `json:"specHash"`
	// CloudInitHash is the hash of the exact cloud-init the VM was made
	// with ("unknown" for a VM made before the operator recorded it).
	// +optional
	CloudInitHash string `json:"cloudInitHash,omitempty"`
	// State is the provider's last word on the VM: Provisioning, Running,
	// Stopped or Terminated.
	// +optional
	State string `json:"state,omitempty"`
	// IP is the VM's routable IPv4 address once it runs.
	// +optional
	IP string `json:"ip,omitempty"`
	// Address is the static address (ip/prefix) the VM was made with;
	// empty when the backend assigned it.
	// +optional
	Address string `json:"address,omitempty"`
	// EgressIP is the address the outside world sees the VM's connections
	// come from, when the provider keeps one per replica across its VMs
	// (an OpenStack floating IP); empty when that is the VM's own IP.
	// +optional
	EgressIP string `json:"egressIP,omitempty"`
	// Port is the port the VM was made to listen on: while replicas roll
	// onto a new spec.port, the ones not replaced yet still listen on the
	// old one, and are probed and served there. Unset for a VM made before
	// the operator recorded it: spec.port.
	// +optional
	Port int32 `json:"port,omitempty"`
	// CreatedAt is when the provider says the VM was created.
	// +optional
	CreatedAt *metav1.Time `json:"createdAt,omitempty"`
}

// ReplicaStatus is one replica's state. Replica 0's VMs are in
// status.instance and status.replacement, where releases before replicas
// kept them, and its entry here only summarises them; every other
// replica's VMs are in its entry.
type ReplicaStatus struct {
	// Index is the replica's index: 0 to spec.replicas-1.
	Index int32 `json:"index"`
	// Instance is the replica's serving VM (for replica 0: a copy of
	// status.instance).
	// +optional
	Instance *InstanceRef `json:"instance,omitempty"`
	// Replacement is the VM being made for a changed spec (for replica 0:
	// a copy of status.replacement).
	// +optional
	Replacement *InstanceRef `json:"replacement,omitempty"`
	// Address is the IP the replica serves at, once it answers.
	// +optional
	Address string `json:"address,omitempty"`
	// EgressAddress is the address the outside world sees the replica's
	// connections come from, when the provider keeps one per replica (an
	// OpenStack floating IP): kept across the replica's VMs, known once
	// its VM runs, and the one to allow-list.
	// +optional
	EgressAddress string `json:"egressAddress,omitempty"`
	// Ready says the replica's proxy answers on its port at Address.
	Ready bool `json:"ready"`
	// Reason says, in one CamelCase word, why the replica does not
	// answer, or what it is doing (the Ready condition's reasons).
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message says the same for a person: the step, the error, the
	// address it waits for.
	// +optional
	Message string `json:"message,omitempty"`
}

// LastError is the last provider error a reconcile met.
type LastError struct {
	// Class is NotFound, Quota, Permanent or Transient.
	Class string `json:"class"`
	// Message is the provider's error text.
	Message string `json:"message"`
	// Time is when it happened.
	Time metav1.Time `json:"time"`
}

// ProxyStatus is what the operator observed.
type ProxyStatus struct {
	// Phase summarises the conditions.
	// +optional
	Phase ProxyPhase `json:"phase,omitempty"`
	// Conditions: Ready (the proxy answers on its port at Address; False
	// says why, by reason), Provisioned (the serving VM runs with an
	// address), CloudInitCurrent (the VM was made with today's default
	// cloud-init), AddressesAllocated (the static addresses of
	// spec.addressPool are held) and Degraded (fewer than spec.replicas
	// replicas answer). docs/operator.md lists every reason.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Address is the serving VM's IP address: the one to allow-list.
	// +optional
	Address string `json:"address,omitempty"`
	// Addresses are the static addresses allocated to the proxy from
	// spec.addressPool, known before its VM exists: the ones to allow-list.
	// +optional
	Addresses []string `json:"addresses,omitempty"`
	// EgressAddresses are the replicas' egress addresses, by index, when
	// the provider keeps one per replica (an OpenStack floating IP): the
	// addresses the outside world sees, and the ones to allow-list, where
	// Address and Addresses are the VMs' own.
	// +optional
	EgressAddresses []string `json:"egressAddresses,omitempty"`
	// Endpoint is the URL pods use: http://<proxy>.<namespace>.svc:<port>.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// Instance is the VM serving the proxy.
	// +optional
	Instance *InstanceRef `json:"instance,omitempty"`
	// Replacement is the VM being made for a changed spec; it becomes
	// Instance once Ready, and the old one is deleted.
	// +optional
	Replacement *InstanceRef `json:"replacement,omitempty"`
	// Replicas is each replica's state, by index.
	// +listType=map
	// +listMapKey=index
	// +optional
	Replicas []ReplicaStatus `json:"replicas,omitempty"`
	// ReadyReplicas counts the replicas that answer.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// Ready is "ready/desired" replicas, for kubectl get.
	// +optional
	Ready string `json:"ready,omitempty"`
	// LastError is the last provider error, cleared when the proxy is Ready.
	// +optional
	LastError *LastError `json:"lastError,omitempty"`
}

// The metadata.name rule below runs on create only (optionalOldSelf: oldSelf has no
// value then): a rule on the root reads the whole object, so on an update
// it could never ratchet, and an object admitted before the rule could
// never have its status written or its finalizer removed. A name never
// changes, so create is the one moment to check it.

// Proxy is a forward proxy on a VM of a configured provider, with a stable
// address to allow-list. Its name is also its Service's name and its VM's
// hostname, so it must be a DNS-1035 label: lowercase letters, digits and
// '-', starting with a letter, at most 63 characters.
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || self.metadata.name.matches('^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label (lowercase letters, digits and '-', starting with a letter, at most 63 characters): it is the Proxy's Service name and its VM's hostname",optionalOldSelf=true
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=egressproxies
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.status.address`
// +kubebuilder:printcolumn:name="Addresses",type=string,JSONPath=`.status.addresses`
// +kubebuilder:printcolumn:name="Egress",type=string,JSONPath=`.status.egressAddresses`
// +kubebuilder:printcolumn:name="CloudInit-Current",type=string,JSONPath=`.status.conditions[?(@.type=="CloudInitCurrent")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Proxy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProxySpec   `json:"spec"`
	Status ProxyStatus `json:"status,omitempty"`
}

// ProxyList is a list of Proxies.
// +kubebuilder:object:root=true
type ProxyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Proxy `json:"items"`
}
