package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// loop is the lane's client of a Proxy's Service during a roll
// (operator/test/e2e): a GET of target through the forward proxy at proxy
// every interval, each on a new connection and a new lookup of the
// proxy's name, as a client that does not keep connections does, until
// the Pod is stopped. It prints a line per request: its start (RFC 3339,
// nanoseconds), "ok" or "fail", its duration, and for a failure why.
func loop(proxy, target, every string) error {
	proxyURL, err := url.Parse(proxy)
	if err != nil || proxyURL.Host == "" {
		return fmt.Errorf("proxy %q: not a URL with a host", proxy)
	}
	interval, err := time.ParseDuration(every)
	if err != nil || interval <= 0 {
		return fmt.Errorf("interval %q: not a positive duration", every)
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(proxyURL), DisableKeepAlives: true,
	}}
	for {
		start := time.Now()
		code, err := getThrough(context.Background(), c, target, false)
		took := time.Since(start).Round(time.Millisecond)
		switch {
		case err != nil:
			fmt.Printf("%s fail %s %v\n", start.Format(time.RFC3339Nano), took, err)
		case code != http.StatusOK:
			fmt.Printf("%s fail %s status %d\n", start.Format(time.RFC3339Nano), took, code)
		default:
			fmt.Printf("%s ok %s\n", start.Format(time.RFC3339Nano), took)
		}
		time.Sleep(time.Until(start.Add(interval)))
	}
}
