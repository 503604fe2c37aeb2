package app

import (
	"crypto/tls"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsServer is how the manager serves /metrics. Secure (the installed
// default, as kubebuilder scaffolds it): HTTPS, and every request
// authenticated with a TokenReview and authorised with a
// SubjectAccessReview for GET on the non-resource URL /metrics (the
// metrics-reader ClusterRole grants it; the operator's metrics-auth-role
// lets it ask). The certificate is tls.crt and tls.key in MetricsCertDir,
// reloaded when they change, or, with none there, one self-signed in
// memory. Not secure: plain HTTP, anyone who reaches the port reads it.
func metricsServer(o Options) metricsserver.Options {
	if !o.SecureMetrics {
		return metricsserver.Options{BindAddress: o.MetricsAddr}
	}
	return metricsserver.Options{
		BindAddress:    o.MetricsAddr,
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		CertDir:        o.MetricsCertDir,
		// HTTP/1.1 only: HTTP/2's stream resets let a client that cannot
		// authenticate still load the server (CVE-2023-44487,
		// CVE-2023-39325); a scrape needs nothing HTTP/2 adds.
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	}
}
