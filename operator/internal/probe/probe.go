// Package probe checks that a proxy answers on its port, from the
// operator: the application-level readiness peers lack (docs/architecture.md, Principles).
package probe

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Prober checks the proxy at ip:port.
type Prober interface {
	Probe(ctx context.Context, ip string, port int32) error
}

// HTTPProxy is a Prober that connects and sends one HTTP request; any HTTP
// status line in answer means a proxy is serving (tinyproxy and squid
// answer a non-proxy request with 400). A port that accepts and says
// nothing, or says something else, is not ready.
type HTTPProxy struct {
	// Dial connects; nil uses a net.Dialer. Tests point it at a local
	// listener.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Timeout bounds the whole probe. Default 5 s.
	Timeout time.Duration
}

// Probe implements Prober.
func (p HTTPProxy) Probe(ctx context.Context, ip string, port int32) error {
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
		return fmt.Errorf("probe %s: %w", addr, err)
	}
	defer func() { _ = conn.Close() }()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if _, err := fmt.Fprintf(conn, "HEAD / HTTP/1.0\r\nUser-Agent: egressproxies-probe\r\n\r\n"); err != nil {
		return fmt.Errorf("probe %s: %w", addr, err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil && line == "" {
		return fmt.Errorf("probe %s: no answer: %w", addr, err)
	}
	if !strings.HasPrefix(line, "HTTP/1.") {
		return fmt.Errorf("probe %s: the port answers, but not as an HTTP proxy: %.40q", addr, line)
	}
	return nil
}
