package metrics

// The cluster's counts (egressproxies_proxies, egressproxies_pool_addresses)
// are the leader's only, as the traffic series are: the metrics Service
// selects every replica, so a count each replica reported would double
// every sum(), and a standby reading its cache at a scrape would start
// informers it otherwise never needs. A standby's scrape has no such
// series; summing over the replicas gives the cluster's count once.

// leading reports whether elected, the manager's Elected channel, is
// closed.
func leading(elected <-chan struct{}) bool {
	select {
	case <-elected:
		return true
	default:
		return false
	}
}
