package binding

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Cluster is what a bound Pod reaches without the proxy: its own cluster.
type Cluster struct {
	// Domain is the cluster's DNS domain (cluster.local by default).
	Domain string
	// APIServer holds the API server's addresses: the kubernetes Service's
	// cluster IPs and the endpoints behind it, which in-cluster clients
	// that read KUBERNETES_SERVICE_HOST or a kubeconfig dial directly.
	APIServer []string
	// ServiceNetworks and PodNetworks are the cluster's Service and Pod
	// CIDRs (the ServiceCIDR objects and the Nodes' podCIDRs), plus those
	// the operator was given with --no-proxy.
	ServiceNetworks, PodNetworks []string
}

// loopback is reached directly by every client; curl and Go skip the
// proxy for it anyway, other runtimes (Python's requests, Java) only when
// NO_PROXY says so.
var loopback = []string{"localhost", "127.0.0.1", "::1"}

// NoProxy is the NO_PROXY of a Pod bound in cluster c: loopback, the
// cluster's names (.svc and .<domain>), the API server's addresses, the
// Service and Pod networks, then extra (from the no-proxy annotations).
// Entries are deduplicated and keep that order, so the value is stable
// for the same inputs.
func NoProxy(c Cluster, extra []string) string {
	entries := slices.Clone(loopback)
	entries = append(entries, ".svc")
	if c.Domain != "" {
		entries = append(entries, "."+strings.TrimPrefix(c.Domain, "."))
	}
	entries = append(entries, c.APIServer...)
	entries = append(entries, c.ServiceNetworks...)
	entries = append(entries, c.PodNetworks...)
	entries = append(entries, extra...)
	seen := make(map[string]bool, len(entries))
	out := entries[:0]
	for _, e := range entries {
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return strings.Join(out, ",")
}

// ParseNoProxy reads the value of an AnnotationNoProxy: comma-separated
// names, .domains, IP addresses or networks. An entry with white space
// inside, or a network that is not one, is refused with its position, so
// a typo never silently sends a workload's traffic elsewhere.
func ParseNoProxy(value string) ([]string, error) {
	var out []string
	for i, raw := range strings.Split(value, ",") {
		e := strings.TrimSpace(raw)
		switch {
		case e == "":
			continue
		case strings.ContainsAny(e, " \t\n\r"):
			return nil, fmt.Errorf("entry %d %q contains white space", i+1, e)
		case strings.Contains(e, "/"):
			if _, err := netip.ParsePrefix(e); err != nil {
				return nil, fmt.Errorf("entry %d %q is not a network (address/prefix): %w", i+1, e, err)
			}
		}
		out = append(out, e)
	}
	return out, nil
}
