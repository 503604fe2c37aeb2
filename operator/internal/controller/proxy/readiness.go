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

// servingBesideOthers reports whether ro's instance serves clients beside
// other replicas' VMs, which can take them when it fails
// (instances.Sight.Serving). Any other keeps the prober's own timeout and
// is deleted as soon as it is found stopped: a lone replica has no other
// VM to take its clients, and a VM that does not serve yet may be slow to
// answer while it boots.
func servingBesideOthers(proxy *v1alpha1.Proxy, ro role) bool {
	return replica.Multi(proxy) && serving(proxy, ro)
}
