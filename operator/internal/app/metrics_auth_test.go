package app

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metricstest"
)

// checkMetricsAuth scrapes the operator's metrics endpoint at addr, served
// as installed (--metrics-secure): HTTPS, each caller authenticated and
// authorised by the API server through the operator's shipped
// metrics-auth-role. Anonymous and unbound callers are refused; a
// ServiceAccount bound to the shipped metrics-reader reads the metrics.
func checkMetricsAuth(t *testing.T, admin client.Client, in install, addr string) {
	t.Helper()
	const ns = "monitoring"
	apply(t, admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	scraper := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scraper", Namespace: ns}}
	stranger := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "stranger", Namespace: ns}}
	apply(t, admin, scraper)
	apply(t, admin, stranger)
	apply(t, admin, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scraper-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: in.NamePrefix + "metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: scraper.Name, Namespace: ns}},
	})

	eventually(t, "the metrics endpoint listens", func() bool {
		conn, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", addr)
		if err == nil {
			_ = conn.Close()
		}
		return err == nil
	})
	url := "https://" + addr + "/metrics"
	if anonymous := metricstest.Scrape(t, url, ""); anonymous.Code != http.StatusUnauthorized {
		t.Errorf("an anonymous scrape answered %s, want %d", anonymous, http.StatusUnauthorized)
	}
	if s := metricstest.Scrape(t, url, token(t, admin, stranger)); s.Code != http.StatusForbidden {
		t.Errorf("a scrape by %s/%s, not bound to metrics-reader, answered %s, want %d", ns, stranger.Name, s, http.StatusForbidden)
	}
	if s := metricstest.Scrape(t, url, token(t, admin, scraper)); s.Code != http.StatusOK || !strings.Contains(s.Body, "egressproxies_proxies") {
		t.Errorf("a scrape by %s/%s, bound to %smetrics-reader, answered %s, want %d with the operator's metrics", ns, scraper.Name, in.NamePrefix, s, http.StatusOK)
	}
}

// token is a bearer token of sa from the TokenRequest API.
func token(t *testing.T, admin client.Client, sa *corev1.ServiceAccount) string {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(600))}}
	if err := admin.SubResource("token").Create(context.Background(), sa, req); err != nil {
		t.Fatalf("token of %s/%s: %v", sa.Namespace, sa.Name, err)
	}
	return req.Status.Token
}
