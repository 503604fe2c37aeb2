package proxy

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// apiCut stands between the reconciler's uncached reader and the API
// server, on loopback: it passes every request through, except reads of
// the Secrets a test cut, which it answers as an API server that cannot
// reach etcd does (503 with a Status). The reconciler then meets a real
// client-go error from a real HTTP answer, not an injected one.
type apiCut struct {
	server *httptest.Server
	cut    sync.Map // "<namespace>/<name>" of a Secret whose reads fail -> *atomic.Int64 counting them
}

// startAPICut returns the cut and the config of a client going through it.
func startAPICut(cfg *rest.Config) (*apiCut, *rest.Config, error) {
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	upstream, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, nil, err
	}
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	proxy.Transport = transport
	c := &apiCut{}
	c.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if key, ok := secretKey(r.URL.Path); ok && r.Method == http.MethodGet {
			if refused, cut := c.cut.Load(key); cut {
				refused.(*atomic.Int64).Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_ = json.NewEncoder(w).Encode(metav1.Status{
					TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
					Status:   metav1.StatusFailure, Message: "etcdserver: request timed out",
					Reason: metav1.StatusReasonServiceUnavailable, Code: http.StatusServiceUnavailable,
				})
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	return c, &rest.Config{Host: c.server.URL}, nil
}

// secretKey returns "<namespace>/<name>" for the path of one Secret.
func secretKey(path string) (string, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) == 6 && parts[0] == "api" && parts[1] == "v1" && parts[2] == "namespaces" && parts[4] == "secrets" {
		return parts[3] + "/" + parts[5], true
	}
	return "", false
}

// cutSecretReads fails every read of the Secret until the test ends or
// restore is called; refused counts the reads it failed.
func cutSecretReads(t *testing.T, namespace, name string) (refused func() int64, restore func()) {
	t.Helper()
	key := namespace + "/" + name
	n := &atomic.Int64{}
	secretCut.cut.Store(key, n)
	restore = func() { secretCut.cut.Delete(key) }
	t.Cleanup(restore)
	return n.Load, restore
}

func (c *apiCut) close() { c.server.Close() }
