// Package probetest stands in for a proxy's port in tests: a loopback
// listener that answers the operator's probe the way a forward proxy does.
package probetest

import (
	"bufio"
	"context"
	"net"
)

// StandIn listens on loopback and, while answer reports true, answers the
// first line of each connection with an HTTP status line (what the probe
// takes for a serving proxy); otherwise it closes the connection silently,
// like a VM still booting. Closing the listener stops it.
func StandIn(answer func() bool) (net.Listener, error) {
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = conn.Close() }()
				_, _ = bufio.NewReader(conn).ReadString('\n')
				if answer() {
					_, _ = conn.Write([]byte("HTTP/1.0 400 Bad Request\r\n\r\n"))
				}
			}()
		}
	}()
	return l, nil
}
