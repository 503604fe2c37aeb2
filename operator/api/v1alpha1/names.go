package v1alpha1

// The names the operator puts on objects: they are part of the API, read
// by users' tooling and by the operator's own packages alike.

// Finalizer holds a Proxy until its VMs are gone.
const Finalizer = "egressproxies.io/instances"

// RollAnnotation replaces a Proxy's VM when its value changes: the way to
// move a serving VM onto the cloud-init the running operator renders (a new
// release's default template, an edited defaultAllowedClients), one Proxy
// at a time, when the user chooses. Its value is part of the spec hash.
const RollAnnotation = "egressproxies.io/roll"

// LabelProxy marks the Services and EndpointSlices the operator creates
// with the name of their Proxy. The manager's cache holds only objects
// carrying it, so the operator neither lists nor watches every Service and
// EndpointSlice in the cluster.
const LabelProxy = "egressproxies.io/proxy"

// The labels of a ProxyAddress, for listing by pool and by Proxy.
const (
	LabelPool     = "egressproxies.io/pool"
	LabelProxyUID = "egressproxies.io/proxy-uid"
)

// LabelEgressVia binds workloads to a Proxy of their own namespace: on a
// Namespace it binds every Pod created in it, on a Pod that Pod (the Pod's
// label wins). The operator's Pod webhook sets the proxy variables
// (HTTP_PROXY, HTTPS_PROXY, NO_PROXY and their lower-case twins) on the
// bound Pods' containers (docs/egress.md, Binding workloads).
const LabelEgressVia = "egressproxies.io/egress-via"

// AnnotationNoProxy adds, on a bound Namespace or Pod, comma-separated
// entries to the NO_PROXY the webhook computes: names, .domains, IPs or
// networks the workload reaches directly.
const AnnotationNoProxy = "egressproxies.io/no-proxy"
