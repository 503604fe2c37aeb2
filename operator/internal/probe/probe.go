// Package probe checks that a proxy answers on its port, from the
// operator: the application-level readiness peers lack (docs/architecture.md, Principles).
package probe

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/images/cloudinit"
)

// Prober checks the proxy at ip:port. With stats, it asks for the
// statistics page of the default cloud-init's tinyproxy in the same request
// (cloudinit.StatsHost) and returns its counters, or nil when the answer
// is not that page; without, it asks for nothing a proxy would forward.
type Prober interface {
	Probe(ctx context.Context, ip string, port int32, stats bool) (*cloudinit.Stats, error)
}

// HTTPProxy is a Prober that connects and sends one HTTP request; any HTTP
// status line in answer means a proxy is serving (tinyproxy and squid
// answer a non-proxy request with 400, tinyproxy its statistics page with
// 200, and a server that is not it the page's .invalid name with an error
// at once). A port that accepts and says nothing, or says something else,
// is not ready.
type HTTPProxy struct {
	// Dial connects; nil uses a net.Dialer. Tests point it at a local
	// listener.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Timeout bounds the whole probe. Default 5 s.
	Timeout time.Duration
}

// maxStatsPage bounds what a probe reads of an answer: the statistics
// page is about 100 bytes, and a server that is not the default tinyproxy
// may answer with a long error page.
const maxStatsPage = 4 << 10

// Probe implements Prober.
func (p HTTPProxy) Probe(ctx context.Context, ip string, port int32, stats bool) (*cloudinit.Stats, error) {
	timeout := p.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dial := p.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(int(port)))
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("probe %s: %w", addr, err)
	}
	defer func() { _ = conn.Close() }()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	request := "HEAD / HTTP/1.0\r\nUser-Agent: egressproxies-probe\r\n\r\n"
	if stats {
		request = "GET http://" + cloudinit.StatsHost + "/ HTTP/1.0\r\nHost: " + cloudinit.StatsHost + "\r\nUser-Agent: egressproxies-probe\r\n\r\n"
	}
	if _, err := io.WriteString(conn, request); err != nil {
		return nil, fmt.Errorf("probe %s: %w", addr, err)
	}
	r := bufio.NewReader(io.LimitReader(conn, maxStatsPage))
	line, err := r.ReadString('\n')
	if err != nil && line == "" {
		return nil, fmt.Errorf("probe %s: no answer: %w", addr, err)
	}
	if !strings.HasPrefix(line, "HTTP/1.") {
		return nil, fmt.Errorf("probe %s: the port answers, but not as an HTTP proxy: %.40q", addr, line)
	}
	if !stats || !strings.HasPrefix(line[len("HTTP/1.x"):], " 200 ") {
		return nil, nil
	}
	// The page follows the headers; tinyproxy closes the connection after
	// it. An answer cut short is a serving proxy without counters.
	resp, err := io.ReadAll(r)
	_, body, found := strings.Cut(string(resp), "\r\n\r\n")
	if err != nil || !found {
		return nil, nil
	}
	if s, ok := cloudinit.ParseStats([]byte(body)); ok {
		return &s, nil
	}
	return nil, nil
}
