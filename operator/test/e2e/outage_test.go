//go:build e2e

package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"
)

// probe is one request the prober sent through the proxy.
type probe struct {
	at   time.Time
	port int
	ok   bool
}

// prober sends GET target through the proxy at addr, on each of ports in
// a loop of its own, every interval, and records which succeeded: what a
// client of the proxy's address sees while its VM is replaced. Each
// request is a new connection, so a VM that is gone shows at once.
type prober struct {
	mu     sync.Mutex
	probes []probe
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

func startProber(t *testing.T, addr string, ports []int, target string, interval time.Duration) *prober {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	p := &prober{stop: cancel}
	for _, port := range ports {
		proxyURL := &url.URL{Scheme: "http", Host: net.JoinHostPort(addr, strconv.Itoa(port))}
		// A short dial: a VM that is gone leaves the connect to the
		// neighbour resolution's 3 s, which would blur the outage.
		dialer := &net.Dialer{Timeout: time.Second}
		c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
			Proxy: http.ProxyURL(proxyURL), DialContext: dialer.DialContext, DisableKeepAlives: true,
		}}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for ctx.Err() == nil {
				ok := getOK(ctx, c, target)
				if ctx.Err() != nil {
					return
				}
				p.mu.Lock()
				p.probes = append(p.probes, probe{at: time.Now(), port: port, ok: ok})
				p.mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(interval):
				}
			}
		}()
	}
	t.Cleanup(p.halt)
	return p
}

func getOK(ctx context.Context, c *http.Client, target string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return err == nil && resp.StatusCode == http.StatusOK
}

// halt stops the prober and waits for its loops.
func (p *prober) halt() {
	p.stop()
	p.wg.Wait()
}

// results returns the probes so far, in the order they ended.
func (p *prober) results() []probe {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]probe(nil), p.probes...)
}

// answeredOn reports whether a probe on port has succeeded.
func (p *prober) answeredOn(port int) bool {
	for _, r := range p.results() {
		if r.ok && r.port == port {
			return true
		}
	}
	return false
}

// switchover reads a replacement from probes: the last success on the old
// port before the first on the new one, that first one, how many probes
// (on either port) ended between the two, all failed, and whether the old
// port answered after the new one had (two VMs serving at once).
type switchover struct {
	lastOld, firstNew time.Time
	failed            int
	oldAfterNew       bool
}

func (s switchover) outage() time.Duration { return s.firstNew.Sub(s.lastOld) }

func switchoverOf(probes []probe, oldPort, newPort int) switchover {
	var s switchover
	for _, r := range probes {
		switch {
		case !r.ok:
		case r.port == newPort && s.firstNew.IsZero():
			s.firstNew = r.at
		case r.port == oldPort && s.firstNew.IsZero():
			s.lastOld = r.at
		case r.port == oldPort:
			s.oldAfterNew = true
		}
	}
	for _, r := range probes {
		if r.at.After(s.lastOld) && r.at.Before(s.firstNew) {
			s.failed++
		}
	}
	return s
}
