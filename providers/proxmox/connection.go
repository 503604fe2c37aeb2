package proxmox

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	pve "github.com/luthermonson/go-proxmox"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// APIError is an error answer of the PVE API. PVE writes its message into
// the HTTP reason phrase ("500 VM is locked (clone)") with a body of
// {"data":null}; a parameter error is 400 "Parameter verification failed."
// with the per-parameter messages in the body's "errors".
//
// go-proxmox v0.8.2 keeps the reason only for 500 and 400: 401 and 403
// become one ErrNotAuthorized without the message (so permission denied
// cannot be told from a bad token), and any other status (404, 502, 503,
// 595) is decoded as if it succeeded, a nil error. The provider's transport
// therefore turns every status of 400 and above into an APIError before
// go-proxmox sees the response, and classify reads status and message from
// it.
type APIError struct {
	StatusCode int
	// Message is the reason phrase: PVE's message.
	Message string
	// Params are the per-parameter messages of a 400.
	Params map[string]string
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("%d %s", e.StatusCode, e.Message)
	if len(e.Params) > 0 {
		keys := make([]string, 0, len(e.Params))
		for k := range e.Params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ": " + strings.TrimSpace(e.Params[k])
		}
		s += " (" + strings.Join(parts, "; ") + ")"
	}
	return s
}

// statusTransport turns error answers into *APIError (see APIError).
type statusTransport struct{ base http.RoundTripper }

func (t statusTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(req)
	if err != nil || res.StatusCode < 400 {
		return res, err
	}
	defer func() { _ = res.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	apiErr := &APIError{StatusCode: res.StatusCode, Message: strings.TrimSpace(strings.TrimPrefix(res.Status, strconv.Itoa(res.StatusCode)))}
	var parsed struct {
		Errors map[string]string `json:"errors"`
	}
	if json.Unmarshal(body, &parsed) == nil && len(parsed.Errors) > 0 {
		apiErr.Params = parsed.Errors
	}
	return nil, apiErr
}

// regionClient is one cluster's API client. It is built on first use (the
// constructor never dials, contract §7) and again when the token files
// change (rotation without restart).
type regionClient struct {
	name   string
	region Region
	id     contract.SecretFile
	secret contract.SecretFile

	mu    sync.Mutex
	http  *http.Client
	api   *pve.Client
	token string // "id=secret", for the upload the provider makes itself
}

func newRegionClient(name string, r Region) *regionClient {
	return &regionClient{name: name, region: r, id: contract.SecretFile{Path: r.TokenIDFile}, secret: contract.SecretFile{Path: r.TokenSecretFile}}
}

// client returns the go-proxmox client, the HTTP client under it and the
// token header value.
func (rc *regionClient) client() (*pve.Client, *http.Client, string, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.api != nil && !rc.id.Changed() && !rc.secret.Changed() {
		return rc.api, rc.http, rc.token, nil
	}
	id, err := rc.id.Read()
	if err != nil {
		return nil, nil, "", err
	}
	secret, err := rc.secret.Read()
	if err != nil {
		return nil, nil, "", err
	}
	if rc.http == nil {
		hc, err := httpClient(rc.region)
		if err != nil {
			return nil, nil, "", err
		}
		rc.http = hc
	}
	rc.api = pve.NewClient(strings.TrimSuffix(rc.region.Endpoint, "/")+"/api2/json",
		pve.WithAPIToken(id, secret), pve.WithHTTPClient(rc.http), pve.WithLogger(quiet{}), pve.WithUserAgent("egress-proxies-operator"))
	rc.token = id + "=" + secret
	return rc.api, rc.http, rc.token, nil
}

// httpClient is the HTTP client every call of a region goes through:
// TLS as configured, bounded dial and handshake, error answers turned into
// APIError, and an otelhttp child span per request under the caller's span
// (child-spans: transport-wrapper; none without a parent span).
func httpClient(r Region) (*http.Client, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: r.InsecureSkipTLSVerify} //nolint:gosec // only by the explicit insecureSkipTLSVerify flag
	if r.CAFile != "" {
		pem, err := os.ReadFile(r.CAFile)
		if err != nil {
			return nil, contract.Permanentf("caFile %s: %w", r.CAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, contract.Permanentf("caFile %s: no PEM certificate in it", r.CAFile)
		}
		tlsConfig.RootCAs = pool
	}
	base := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
	}
	traced := otelhttp.NewTransport(statusTransport{base: base},
		otelhttp.WithFilter(func(r *http.Request) bool { return trace.SpanFromContext(r.Context()).SpanContext().IsValid() }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return "proxmox " + r.Method + " " + spanPath(r.URL.Path) }),
	)
	return &http.Client{Transport: traced}, nil
}

// spanPath shortens an API path for a span name: numbers and UPIDs become
// placeholders, so names group well.
func spanPath(p string) string {
	p = strings.TrimPrefix(p, "/api2/json")
	segs := strings.Split(p, "/")
	for i, s := range segs {
		switch {
		case strings.HasPrefix(s, "UPID:"):
			segs[i] = "{upid}"
		case s != "" && strings.Trim(s, "0123456789") == "":
			segs[i] = "{vmid}"
		}
	}
	return strings.Join(segs, "/")
}

// quiet silences go-proxmox's own logger: at debug level it prints request
// bodies, and the provider logs through logr (§12).
type quiet struct{}

func (quiet) Debugf(string, ...any) {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Infof(string, ...any)  {}
func (quiet) Warnf(string, ...any)  {}
