package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"
)

// through is the lane's client Pod (operator/test/e2e): one GET of target
// through the forward proxy at proxy, e.g. http://egress.default.svc:3128,
// retried on connection errors until an HTTP answer comes or limit
// passes (the proxy's Service may lag its Ready condition by a moment).
// PROXY "env" uses the proxy the environment names (HTTP_PROXY,
// NO_PROXY), and prints those first.
// It prints "status: <status>", "via: <Via>" and the body; anything but a
// 200 is an error, so the Pod's phase says the outcome and its log why.
func through(proxy, target string, limit time.Duration) error {
	c := &http.Client{Timeout: 10 * time.Second}
	if proxy == "env" {
		// The proxy the Pod's environment names, as an application that
		// sets none of its own would use it (a Pod bound by the operator's
		// webhook); printed, so the test sees what the Pod was given.
		fmt.Printf("HTTP_PROXY=%s\nNO_PROXY=%s\n", os.Getenv("HTTP_PROXY"), os.Getenv("NO_PROXY"))
		c.Transport = &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true}
	} else {
		proxyURL, err := url.Parse(proxy)
		if err != nil || proxyURL.Host == "" {
			return fmt.Errorf("proxy %q: not a URL with a host, nor env", proxy)
		}
		c.Transport = &http.Transport{Proxy: http.ProxyURL(proxyURL), DisableKeepAlives: true}
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for attempt := 1; ; attempt++ {
		code, err := getThrough(ctx, c, target, true)
		if err == nil {
			if code != http.StatusOK {
				return fmt.Errorf("GET %s through %s: status %d", target, proxy, code)
			}
			return nil
		}
		fmt.Fprintf(os.Stderr, "attempt %d: %v\n", attempt, err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("no answer through %s after %s: %w", proxy, limit, err)
		case <-time.After(time.Second):
		}
	}
}

// getThrough GETs target with c and, when show is set, prints the status,
// the Via header and the body.
func getThrough(ctx context.Context, c *http.Client, target string, show bool) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if show {
		fmt.Printf("status: %s\nvia: %s\n%s\n", resp.Status, resp.Header.Get("Via"), body)
	}
	return resp.StatusCode, nil
}
