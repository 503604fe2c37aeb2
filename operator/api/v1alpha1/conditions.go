package v1alpha1

// Condition types.
const (
	// ConditionReady: the proxy answers on its port at status.address
	// (Proxy), or every check passes (ProviderHealth).
	ConditionReady = "Ready"
	// ConditionProvisioned: the serving VM runs with an address.
	ConditionProvisioned = "Provisioned"
	// ConditionCloudInitCurrent: the serving VM was made with the
	// cloud-init the operator would deliver today. False after an upgrade
	// that changed the default template: the VM keeps serving until the
	// user rolls it (annotation egressproxies.io/roll).
	ConditionCloudInitCurrent = "CloudInitCurrent"
	// ConditionAddressesAllocated: the Proxy holds its static addresses
	// from spec.addressPool (status.addresses). False says why not yet.
	ConditionAddressesAllocated = "AddressesAllocated"
	// ConditionDegraded: True while fewer than spec.replicas replicas
	// answer; the message names the missing ones. Ready stays True while
	// at least one answers.
	ConditionDegraded = "Degraded"
	// ConditionValid: an AddressPool's fields all parse; False names the
	// field and the value that does not.
	ConditionValid = "Valid"
	// ConditionAddressesUnique: every address an AddressPool's Proxies
	// hold is held once among its provider entry's ProxyAddresses. False
	// names each address held twice (allocated from overlapping pools
	// before the operator refused the overlap): two VMs may answer on it,
	// and only a person can choose which Proxy gives it up.
	ConditionAddressesUnique = "AddressesUnique"
)

// The reasons of AddressesAllocated and of an AddressPool's Valid.
const (
	ReasonAddressesAllocated = "Allocated"
	// ReasonPoolNotFound: no AddressPool of spec.addressPool's name.
	ReasonPoolNotFound = "PoolNotFound"
	// ReasonPoolInvalid: the pool cannot serve this Proxy: a field does not
	// parse, or it is another provider entry's or region's.
	ReasonPoolInvalid = "PoolInvalid"
	// ReasonPoolExhausted: every address of the pool is held.
	ReasonPoolExhausted = "PoolExhausted"
	// ReasonAddressTaken: a pinned address is held by another Proxy, or is
	// not in the pool.
	ReasonAddressTaken = "AddressTaken"
	// ReasonAddressPending: a pinned address is held by a Proxy being
	// deleted (or gone) whose VM is not gone yet.
	ReasonAddressPending = "AddressPending"
	ReasonPoolValid      = "Valid"
	// ReasonPoolOverlaps: the pool hands out addresses an older pool of
	// the same provider entry hands out too (Valid=False, naming both
	// pools and the range); its Proxies get no address from it.
	ReasonPoolOverlaps = "PoolOverlaps"
	// ReasonAddressesUnique and ReasonDuplicateAddress are the reasons of
	// AddressesUnique.
	ReasonAddressesUnique  = "Unique"
	ReasonDuplicateAddress = "DuplicateAddress"
)

// Condition reasons.
const (
	// ReasonReplicasNotReady: Degraded, some replicas do not answer.
	ReasonReplicasNotReady = "ReplicasNotReady"
	// ReasonRemoving: a replica beyond spec.replicas whose VMs are being
	// deleted (status.replicas[].reason); its address is released once
	// they are gone.
	ReasonRemoving = "Removing"
	// ReasonAllReplicasReady: not Degraded.
	ReasonAllReplicasReady      = "AllReplicasReady"
	ReasonReady                 = "Ready"
	ReasonProvisioning          = "Provisioning"
	ReasonProxyUnreachable      = "ProxyUnreachable"
	ReasonQuotaExceeded         = "QuotaExceeded"
	ReasonProviderError         = "ProviderError"
	ReasonBackendUnavailable    = "BackendUnavailable"
	ReasonProviderNotConfigured = "ProviderNotConfigured"
	ReasonCloudInitUnavailable  = "CloudInitUnavailable"
	ReasonInstanceGone          = "InstanceGone"
	ReasonInstanceStopped       = "InstanceStopped"
	ReasonInstanceNotOwned      = "InstanceNotOwned"
	ReasonServiceUnavailable    = "ServiceUnavailable"
	ReasonReplacing             = "Replacing"
	ReasonDeleting              = "Deleting"
	ReasonChecksFailed          = "ChecksFailed"
	ReasonChecksPassed          = "ChecksPassed"
	ReasonCloudInitCurrent      = "CloudInitCurrent"
	ReasonTemplateChanged       = "TemplateChanged"
	// ReasonInvalidName: the Proxy's name cannot name a Service and a VM
	// (a Proxy created before the CRD refused such names).
	ReasonInvalidName = "InvalidName"
	// ReasonAllowedClientsRefused: allowedClients (or the defaults) would
	// open the proxy to all of IPv4 or IPv6, or leave the networks the
	// operator's config allows.
	ReasonAllowedClientsRefused = "AllowedClientsRefused"
	// ReasonEgressRefused: spec.egress holds a destination the default
	// cloud-init cannot render, or is set beside spec.cloudInit (a Proxy
	// admitted before the CRD's rules).
	ReasonEgressRefused = "EgressRefused"

	// ReasonNamespaceNotAllowed: the Proxy's namespace is not one its
	// provider entry's or its AddressPool's allowedNamespaces selects. The
	// message names the entry or pool, the namespace and the selector.
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"

	// ReasonServiceConflict: a Service or EndpointSlice of the Proxy's name
	// exists that the operator did not create; it is left untouched, and
	// the message names it and its owner.
	ReasonServiceConflict = "ServiceConflict"
	// ReasonCloudInitForbidden: the operator may not read the cloud-init
	// Secret; the message names the RoleBinding that would let it.
	ReasonCloudInitForbidden = "CloudInitForbidden"
)

// ReasonCredentialsUnavailable says a credential file the provider reads is
// missing, empty or unreadable; the message names its path. Retried with
// back-off, and at once when the mounted credential files change.
const ReasonCredentialsUnavailable = "CredentialsUnavailable"
