package probe

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/images/cloudinit"
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
			_, err := p.Probe(context.Background(), "127.0.0.1", serve(t, tc.reply), false)
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
	if _, err := (HTTPProxy{Timeout: time.Second}).Probe(context.Background(), "127.0.0.1", int32(c), true); err == nil {
		t.Error("probe of a closed port succeeded")
	}
}

// recordRequests answers every connection on a loopback port with reply,
// after reading its request's head, and sends each request's head to the
// returned channel.
func recordRequests(t *testing.T, reply string) (int32, <-chan string) {
	t.Helper()
	heads := make(chan string, 10)
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
			r := bufio.NewReader(conn)
			var head strings.Builder
			for {
				line, err := r.ReadString('\n')
				head.WriteString(line)
				if err != nil || line == "\r\n" {
					break
				}
			}
			heads <- head.String()
			_, _ = conn.Write([]byte(reply))
			_ = conn.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	p, _ := strconv.Atoi(port)
	return int32(p), heads
}

// The page as tinyproxy 1.11 answers it (stats.c showstats: the status
// "Statistic requested", then the StatFile with its variables filled).
const statsAnswer = "HTTP/1.0 200 Statistic requested\r\nServer: tinyproxy/1.11.1\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n" +
	"egress-proxies-stats v2\nopen 2\nconnections 57\nbad 1\ndenied 4\nrefused 0\nclient-refusals 1\ndestination-refusals 3\n"

func TestProbeReadsTheStatisticsPage(t *testing.T) {
	p := HTTPProxy{Timeout: time.Second}
	port, heads := recordRequests(t, statsAnswer)
	got, err := p.Probe(context.Background(), "127.0.0.1", port, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := (cloudinit.Stats{Open: 2, Connections: 57, Bad: 1, Denied: 4, ClientRefusals: 1, DestinationRefusals: 3}); got == nil || *got != want {
		t.Errorf("stats = %+v, want %+v", got, want)
	}
	head := <-heads
	if !strings.HasPrefix(head, "GET http://"+cloudinit.StatsHost+"/ HTTP/1.0\r\n") || !strings.Contains(head, "\r\nHost: "+cloudinit.StatsHost+"\r\n") {
		t.Errorf("the request for the page: %q", head)
	}

	// Without stats, nothing a proxy would forward anywhere, and no
	// counters even from a server that sends the page.
	got, err = p.Probe(context.Background(), "127.0.0.1", port, false)
	if err != nil || got != nil {
		t.Errorf("probe without stats = %+v, %v; want nil, nil", got, err)
	}
	if head := <-heads; !strings.HasPrefix(head, "HEAD / HTTP/1.0\r\n") || strings.Contains(head, "Host:") {
		t.Errorf("the probe without stats sent %q", head)
	}
}

// A serving proxy that gives no counters is still ready: the operator is
// not among its clients (tinyproxy's 403), another server answers the
// page's name, or the page is cut short.
func TestProbeServingWithoutCounters(t *testing.T) {
	p := HTTPProxy{Timeout: time.Second}
	for name, reply := range map[string]string{
		"the operator not a client":  "HTTP/1.0 403 Access denied\r\nContent-Type: text/html\r\n\r\n<html>Access denied</html>",
		"another server":             "HTTP/1.1 503 Service Unavailable\r\nServer: squid\r\n\r\nERR_DNS_FAIL",
		"a 200 that is not the page": "HTTP/1.1 200 OK\r\n\r\n<html>hello</html>",
		"the page cut short":         statsAnswer[:len(statsAnswer)-20],
		"headers cut short":          "HTTP/1.0 200 Statistic requested\r\nServer: tinyproxy",
	} {
		got, err := p.Probe(context.Background(), "127.0.0.1", serve(t, reply), true)
		if err != nil || got != nil {
			t.Errorf("%s: probe = %+v, %v; want serving without counters", name, got, err)
		}
	}
}
