package readiness

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egress-proxies/egress-proxies-operator/images/cloudinit"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/probe"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/userdata"
)

// Watch probes every serving VM of each Proxy of more than one
// replica every Period (the Proxy controller's Timing.Watch, the
// --serving-watch-period flag), between the resyncs that check a Ready
// Proxy only once a minute: a replica whose VM died would stay in the
// Service until then, and the clients sent to it fail while the others
// could serve them. A VM that does not answer within watchTimeout wakes
// its Proxy's reconcile at once, which asks the backend (a VM powered off
// leaves the Service in that reconcile) and probes it as any reconcile
// does (docs/addresses.md, "Failover"). A one-replica Proxy is left to
// its resync: no other VM could take its clients.
//
// The watch asks a VM of the default cloud-init for its statistics page
// as the reconcile's probe does, and its readings go to the traffic
// series: a watch probe is then no connection of the clients', and the
// series are at most a watch period old.
type Watch struct {
	Reader client.Reader
	Prober probe.Prober
	Period time.Duration
	// DefaultClients render the default cloud-init, to tell a VM that
	// serves the statistics page.
	DefaultClients []string
	// Observe takes a VM's traffic counters.
	Observe func(namespace, name string, replica int, providerID string, s cloudinit.Stats)
	// Wake reconciles a Proxy with a VM that did not answer.
	Wake func(*v1alpha1.Proxy)
}

// watchTimeout bounds a watch probe: a VM on the backend's network answers
// a connection in milliseconds; a dead one never does. A live VM too slow
// for it costs only a reconcile, whose own probe waits longer.
const watchTimeout = 500 * time.Millisecond

// watchConcurrency bounds the probes in flight at once.
const watchConcurrency = 32

// NeedLeaderElection keeps the watch with the reconciler it wakes.
func (w *Watch) NeedLeaderElection() bool { return true }

// Start probes every period until ctx ends.
func (w *Watch) Start(ctx context.Context) error {
	wait.UntilWithContext(ctx, w.round, w.Period)
	return nil
}

// round probes every serving VM once.
func (w *Watch) round(ctx context.Context) {
	var list v1alpha1.ProxyList
	if err := w.Reader.List(ctx, &list); err != nil {
		logf.FromContext(ctx).Error(err, "serving watch: listing the Proxies")
		return
	}
	slots := make(chan struct{}, watchConcurrency)
	var wg sync.WaitGroup
	for i := range list.Items {
		proxy := &list.Items[i]
		if !replica.Multi(proxy) || !proxy.DeletionTimestamp.IsZero() {
			continue
		}
		current := w.defaultHash(proxy)
		var once sync.Once
		for _, sl := range proxy.Status.Replicas {
			ref := sl.Instance
			if !sl.Ready || ref == nil || ref.IP == "" || ref.ProviderID == "" {
				continue
			}
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				pctx, cancel := context.WithTimeout(ctx, watchTimeout)
				defer cancel()
				port := replica.PortOf(proxy, ref)
				s, err := w.Prober.Probe(pctx, ref.IP, port, replica.ServesStats(proxy, ref, current))
				switch {
				case err != nil:
					// The first sign of a VM's death in the log, to the
					// nanosecond: a failover is read off it.
					logf.FromContext(ctx).Info("serving watch: a serving VM did not answer; waking its Proxy",
						"namespace", proxy.Namespace, "name", proxy.Name, "replica", sl.Index,
						"address", net.JoinHostPort(ref.IP, strconv.Itoa(int(port))), "instance", ref.Name, "reason", err.Error())
					once.Do(func() { w.Wake(proxy) })
				case s != nil:
					w.Observe(proxy.Namespace, proxy.Name, int(sl.Index), ref.ProviderID, *s)
				}
			})
		}
	}
	wg.Wait()
}

// defaultHash is the hash of the default cloud-init the Proxy's VMs are
// made from now; "" for a Proxy with its own cloud-init.
func (w *Watch) defaultHash(proxy *v1alpha1.Proxy) string {
	if proxy.Spec.CloudInit != nil {
		return ""
	}
	data, err := userdata.Default(proxy, w.DefaultClients)
	if err != nil {
		return ""
	}
	return replica.CloudInitHash(data)
}
