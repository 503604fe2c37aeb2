package v1alpha1

// Condition types.
const (
	// ConditionReady: the proxy answers on its port at status.address
	// (Proxy), or every check passes (ProviderHealth).
	ConditionReady = "Ready"
	// ConditionProvisioned: the serving VM runs with an address.
	ConditionProvisioned = "Provisioned"
)

// Condition reasons.
const (
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
	ReasonServiceUnavailable    = "ServiceUnavailable"
	ReasonReplacing             = "Replacing"
	ReasonDeleting              = "Deleting"
	ReasonChecksFailed          = "ChecksFailed"
	ReasonChecksPassed          = "ChecksPassed"
)
