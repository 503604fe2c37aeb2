package proxy

import (
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// serving reports whether ro's instance is the one clients use now: the
// serving instance (not a replacement) of a replica that is ready.
func serving(proxy *v1alpha1.Proxy, ro role) bool {
	return !ro.repl && replica.Ready(proxy, ro.index)
}
