//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// withEgressToOrigin limits p to the origin's address and port
// (docs/egress.md).
func withEgressToOrigin(t *testing.T, p *v1alpha1.Proxy, org *origin) *v1alpha1.Proxy {
	t.Helper()
	host, port := originHostPort(t, org)
	p.Spec.Egress = &v1alpha1.Egress{Destinations: []v1alpha1.Destination{{Network: host + "/32", Ports: []int32{int32(port)}}}}
	return p
}

func originHostPort(t *testing.T, org *origin) (string, int) {
	t.Helper()
	u, err := url.Parse(org.URL)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatalf("origin %s: %v", org.URL, err)
	}
	return u.Hostname(), port
}

// checkEgress proves p's destination policy on its real VM: a client Pod
// reaches the origin through the Service, and the origin sees the VM's
// address; another port of the origin's host and another host get the
// policy's 403, and the origin never sees them.
func checkEgress(t *testing.T, cs kubernetes.Interface, l lane, org *origin, p *v1alpha1.Proxy) {
	t.Helper()
	addr := p.Status.Address
	path := "/egress-allowed"
	serviceURL := fmt.Sprintf("http://%s.%s.svc:%d", p.Name, p.Namespace, p.Spec.Port)
	ok, out, _ := runClientPod(t.Context(), t, cs, l, p.Namespace, "client-egress", serviceURL, org.URL+path)
	if !ok || !strings.Contains(out, "status: 200 OK") || !strings.Contains(out, org.body(path)) {
		t.Errorf("a client Pod did not reach the allowed origin through %s:\n%s", serviceURL, out)
	}
	if got := org.sources(path); !slices.Equal(got, []string{addr}) {
		t.Errorf("the origin saw the allowed request from %v, want only from the VM %s", got, addr)
	}
	host, port := originHostPort(t, org)
	refusal := "Refused by the egress policy of Proxy " + p.Namespace + "/" + p.Name
	for _, target := range []string{
		fmt.Sprintf("http://%s/egress-port", net.JoinHostPort(host, strconv.Itoa(port+1))),
		"http://not-allowed.example/egress-host",
	} {
		got := firstProxied(t, addr, target, "", time.Minute)
		if got.code != http.StatusForbidden || !strings.Contains(got.body, refusal) {
			t.Errorf("GET %s through %s: %s %q; want 403 naming the policy", target, addr, got.status, got.body)
		}
	}
	if got := org.sources("/egress-port"); len(got) != 0 {
		t.Errorf("the origin saw a refused request from %v", got)
	}
	t.Logf("egress policy of %s on its VM %s: the origin reached from %v, another port and another host refused with 403", p.Name, addr, org.sources(path))
}
