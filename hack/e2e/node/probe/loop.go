package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"time"
)

// loop is the lane's client of a Proxy's Service during a roll
// (operator/test/e2e): a GET of target through the forward proxy at proxy
// every interval, each on a new connection and a new lookup of the
// proxy's name, as a client that does not keep connections does, until
// the Pod is stopped. It prints a line per request: its start (RFC 3339,
// nanoseconds), "ok" or "fail", its duration, and for a failure why and
// how far it came (the phases below), so a slow lookup, a connection
// that hangs and a proxy that does not answer are told apart.
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
		var p phases
		ctx := httptrace.WithClientTrace(context.Background(), p.trace(start))
		code, err := getThrough(ctx, c, target, false)
		took := time.Since(start).Round(time.Millisecond)
		switch {
		case err != nil:
			fmt.Printf("%s fail %s %v [%s]\n", start.Format(time.RFC3339Nano), took, err, p.String())
		case code != http.StatusOK:
			fmt.Printf("%s fail %s status %d [%s]\n", start.Format(time.RFC3339Nano), took, code, p.String())
		default:
			fmt.Printf("%s ok %s\n", start.Format(time.RFC3339Nano), took)
		}
		time.Sleep(time.Until(start.Add(interval)))
	}
}

// phases is how far one request came, each step with its time since the
// request's start: the lookup of the proxy's name, the connection to it,
// the request written, the first byte of the answer.
type phases struct {
	steps []string
}

func (p *phases) trace(start time.Time) *httptrace.ClientTrace {
	at := func(format string, args ...any) {
		p.steps = append(p.steps, fmt.Sprintf(format, args...)+" +"+time.Since(start).Round(time.Millisecond).String())
	}
	return &httptrace.ClientTrace{
		DNSStart: func(i httptrace.DNSStartInfo) { at("lookup %s", i.Host) },
		DNSDone: func(i httptrace.DNSDoneInfo) {
			if i.Err != nil {
				at("lookup failed: %v", i.Err)
				return
			}
			at("looked up %v", i.Addrs)
		},
		ConnectStart: func(_, addr string) { at("connecting %s", addr) },
		ConnectDone: func(_, addr string, err error) {
			if err != nil {
				at("connect %s failed: %v", addr, err)
				return
			}
			at("connected %s", addr)
		},
		WroteRequest:         func(i httptrace.WroteRequestInfo) { at("request written") },
		GotFirstResponseByte: func() { at("first byte") },
	}
}

func (p *phases) String() string {
	if len(p.steps) == 0 {
		return "no phase reached"
	}
	return strings.Join(p.steps, "; ")
}
