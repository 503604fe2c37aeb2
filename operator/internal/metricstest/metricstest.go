// Package metricstest is what the tests of the operator's metrics endpoint
// share (its unit, install and end-to-end tests): a scrape with a bearer
// token that trusts the endpoint's self-signed certificate, and a free
// loopback address to serve an endpoint on.
package metricstest

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Answer is what a scrape got: Code 0 and the error in Body when nothing
// answered.
type Answer struct {
	Code int
	Body string
}

func (a Answer) String() string {
	if a.Code == 0 {
		return "nothing (" + a.Body + ")"
	}
	return http.StatusText(a.Code) + ": " + strings.TrimSpace(a.Body[:min(len(a.Body), 200)])
}

// Scrape GETs url with a bearer token (none when empty), trusting any
// certificate: the operator serves its metrics with a self-signed one
// unless given --metrics-cert-dir.
func Scrape(t testing.TB, url, bearer string) Answer {
	t.Helper()
	// No keep-alive: each scrape has a transport of its own, and a
	// connection kept idle in it would stay open for good, holding a
	// goroutine in the scraped process too (the fault benchmark counts
	// those).
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a test of a self-signed endpoint
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.Do(req)
	if err != nil {
		return Answer{Body: err.Error()}
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return Answer{Code: resp.StatusCode, Body: string(body)}
}

// FreeAddr is a loopback address with a port nothing listens on now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}
