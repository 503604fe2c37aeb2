package probe

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// serve answers every connection on a loopback port with reply (nothing
// when reply is empty) and returns the port.
func serve(t *testing.T, reply string) int32 {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = bufio.NewReader(conn).ReadString('\n')
			if reply != "" {
				_, _ = conn.Write([]byte(reply))
			}
			_ = conn.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	p, _ := strconv.Atoi(port)
	return int32(p)
}

func TestProbe(t *testing.T) {
	p := HTTPProxy{Timeout: time.Second}
	for _, tc := range []struct {
		name, reply string
		wantErr     string
	}{
		{"tinyproxy's answer to a non-proxy request", "HTTP/1.0 400 Bad Request\r\n\r\n", ""},
		{"squid's", "HTTP/1.1 400 Bad Request\r\nServer: squid\r\n\r\n", ""},
		{"not HTTP", "SSH-2.0-OpenSSH_9.2\r\n", "not as an HTTP proxy"},
		{"silent", "", "no answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Probe(context.Background(), "127.0.0.1", serve(t, tc.reply))
			if tc.wantErr == "" && err != nil {
				t.Errorf("probe failed: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("probe = %v, want an error saying %q", err, tc.wantErr)
			}
		})
	}
}

func TestProbeClosedPort(t *testing.T) {
	// Take a port's listener away: nothing listens there any more.
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, closed, _ := net.SplitHostPort(l.Addr().String())
	_ = l.Close()
	c, _ := strconv.Atoi(closed)
	if err := (HTTPProxy{Timeout: time.Second}).Probe(context.Background(), "127.0.0.1", int32(c)); err == nil {
		t.Error("probe of a closed port succeeded")
	}
}
