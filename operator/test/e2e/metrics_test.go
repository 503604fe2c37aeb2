//go:build e2e

package e2e

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metricstest"
)

const (
	metricsService = "egress-proxies-controller-manager-metrics-service"
	metricsReader  = "egress-proxies-metrics-reader"
)

// checkMetrics scrapes the operator at an endpoint of its metrics Service
// as a user's Prometheus would: with the token of a ServiceAccount bound to the
// shipped metrics-reader ClusterRole it gets the operator's metrics; with
// no token it is refused (the operator asks the API server who calls,
// TokenReview, and whether it may, SubjectAccessReview). The certificate
// is the operator's self-signed one (docs/install.md, metrics), so it is
// not verified here.
func checkMetrics(t *testing.T, l lane) {
	t.Helper()
	token := metricsReaderToken(t, l, "e2e-scraper")
	// An endpoint of the Service, a Pod: the lane's namespace has no
	// default route, so a ClusterIP is reachable from Pods only.
	ips := strings.Fields(kubectl(t, l, nil, "-n", installNamespace, "get", "endpointslices",
		"-l", "kubernetes.io/service-name="+metricsService, "-o", "jsonpath={.items[*].endpoints[*].addresses[0]}"))
	if len(ips) == 0 {
		t.Fatalf("the metrics Service %s has no endpoints", metricsService)
	}
	url := "https://" + net.JoinHostPort(ips[0], "8443") + "/metrics"
	if a := metricstest.Scrape(t, url, ""); a.Code != http.StatusUnauthorized {
		t.Errorf("an anonymous scrape of %s answered %s, want %d", url, a, http.StatusUnauthorized)
	}
	// Every replica serves its metrics; the cluster's counts only the
	// leader's, so a sum over the replicas counts each Proxy once.
	counting := 0
	for _, ip := range ips {
		u := "https://" + net.JoinHostPort(ip, "8443") + "/metrics"
		a := metricstest.Scrape(t, u, token)
		if a.Code != http.StatusOK || !strings.Contains(a.Body, "\negressproxies_build_info{") {
			t.Errorf("a scrape of %s as a metrics-reader answered %s, want %d with egressproxies_build_info", u, a, http.StatusOK)
		}
		if strings.Contains(a.Body, "\negressproxies_proxies{") {
			counting++
		}
	}
	if counting != 1 {
		t.Errorf("%d of the %d replicas report egressproxies_proxies; want the leader alone", counting, len(ips))
	}
	t.Logf("metrics of %d replicas: anonymous refused, metrics-reader answered; the cluster's counts from %d of them", len(ips), counting)
}

// metricsReaderToken makes a ServiceAccount sa in the install's namespace,
// binds it to the shipped metrics-reader ClusterRole, as docs/operator.md
// tells a Prometheus's owner to, and returns a token of it.
func metricsReaderToken(t *testing.T, l lane, sa string) string {
	t.Helper()
	kubectl(t, l, nil, "-n", installNamespace, "create", "serviceaccount", sa)
	kubectl(t, l, nil, "create", "clusterrolebinding", sa, "--clusterrole="+metricsReader,
		"--serviceaccount="+installNamespace+":"+sa)
	return strings.TrimSpace(kubectl(t, l, nil, "-n", installNamespace, "create", "token", sa, "--duration=2h"))
}
