package cloudinit

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The destination policy as the real servers read it: tinyproxy and squid
// from Debian (hack/packages.sh, set proxies), each started on loopback
// with the files the default cloud-init writes in place, in a mount
// namespace whose /etc/hosts names the test's origins (and whose resolver
// is loopback, so nothing is asked of another host). Needs root; `make
// test/images` sets CLOUDINIT_TEST_SERVERS=1, which turns a missing
// prerequisite into a failure instead of a skip.
func TestDestinationPolicyOnRealServers(t *testing.T) {
	for _, server := range []Server{Tinyproxy, Squid} {
		t.Run(string(server), func(t *testing.T) {
			requireServers(t, server)
			testPolicyOn(t, server)
		})
	}
}

func requireServers(t *testing.T, server Server) {
	t.Helper()
	fail := t.Skipf
	if os.Getenv("CLOUDINIT_TEST_SERVERS") == "1" {
		fail = t.Fatalf
	}
	if os.Geteuid() != 0 {
		fail("%s on loopback in a mount namespace needs root (make test/images runs it in CI)", server)
	}
	for _, bin := range []string{string(server), "unshare", "mount"} {
		if _, err := exec.LookPath(bin); err != nil {
			fail("%s is not installed: hack/apt-ensure.sh @proxies", bin)
		}
	}
}

// outcome is what a request through the proxy must come to.
type outcome int

const (
	through outcome = iota // the origin answers
	passes                 // anything but the policy's 403 (no origin listens)
	refused                // the policy's 403
	stopped                // no origin answers: the policy's 403 or a malformed request
)

// refusal is what every refusal page of the policy says.
const refusal = "Refused by the egress policy of Proxy default/partner"

func testPolicyOn(t *testing.T, server Server) {
	dir := t.TempDir()
	origin := startOrigins(t, "127.0.0.1", "127.0.0.2", "127.0.3.1")
	closed := freePort(t) // nothing listens there
	port := freePort(t)
	out, err := Render(Proxy{
		Hostname: "partner", Port: int32(port), Server: server, Policy: "Proxy default/partner",
		// 127.0.0.3 is not a client: the client-refusal case dials from it.
		AllowedClients: []string{"127.0.0.1/32", "127.0.0.2/32"},
		Destinations: []Destination{
			{Host: "api.partner.example", Ports: []int32{int32(origin)}},
			{Host: "*.wild.example", Ports: []int32{int32(origin)}},
			{Network: "127.0.0.2/32", Ports: []int32{int32(origin)}},
			{Network: "127.0.2.0/23", Ports: []int32{int32(origin)}},
			{Host: "default.example"},
			{Host: "prefix.example", Ports: []int32{int32(origin / 10)}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"api.partner.example", "other.partner.example", "api.partner.example.evil.example",
		"x.wild.example", "a.b.wild.example", "wild.example", "xwild.example", "default.example", "prefix.example", "xapi.partner.example"}
	write(t, filepath.Join(dir, "hosts"), "127.0.0.1 localhost "+strings.Join(names, " ")+"\n")
	write(t, filepath.Join(dir, "resolv.conf"), "nameserver 127.0.0.1\n")
	stop := startServer(t, server, dir, port, out)
	defer stop()

	o, c := strconv.Itoa(origin), strconv.Itoa(closed)
	for _, tc := range []struct {
		method, target string
		want           outcome
		from           string // the origin that answers, for through
	}{
		{"GET", "http://api.partner.example:" + o + "/", through, "127.0.0.1"},
		{"GET", "http://API.Partner.EXAMPLE:" + o + "/a", through, "127.0.0.1"},
		{"CONNECT", "api.partner.example:" + o, through, "127.0.0.1"},
		{"GET", "http://api.partner.example:" + c + "/", refused, ""},
		{"CONNECT", "api.partner.example:" + c, refused, ""},
		// A port or a name the allowed one is a prefix of.
		{"CONNECT", "prefix.example:" + o, refused, ""},
		{"CONNECT", "xapi.partner.example:" + o, refused, ""},
		{"GET", "http://prefix.example:" + o + "/", refused, ""},
		{"GET", "http://other.partner.example:" + o + "/http://api.partner.example:" + o + "/", refused, ""},
		{"GET", "http://api.partner.example/", refused, ""},
		{"GET", "http://other.partner.example:" + o + "/", refused, ""},
		{"GET", "http://api.partner.example.evil.example:" + o + "/", refused, ""},
		// A user part: what follows the "@" is the host a proxy connects to.
		{"GET", "http://api.partner.example:" + o + "@other.partner.example:" + o + "/", stopped, ""},
		{"CONNECT", "api.partner.example:" + o + "@other.partner.example:" + o, stopped, ""},
		{"GET", "http://x.wild.example:" + o + "/", through, "127.0.0.1"},
		{"CONNECT", "a.b.wild.example:" + o, through, "127.0.0.1"},
		{"GET", "http://wild.example:" + o + "/", refused, ""},
		{"GET", "http://xwild.example:" + o + "/", refused, ""},
		{"GET", "http://127.0.0.2:" + o + "/", through, "127.0.0.2"},
		{"CONNECT", "127.0.0.2:" + o, through, "127.0.0.2"},
		{"GET", "http://127.0.0.1:" + o + "/", refused, ""},
		{"GET", "http://127.0.3.1:" + o + "/", through, "127.0.3.1"},
		{"GET", "http://127.0.4.1:" + o + "/", refused, ""},
		{"GET", "http://127.0.1.1:" + o + "/", refused, ""},
		// A destination without ports: plain HTTP to 80, CONNECT to 443,
		// and nothing else. Nothing listens there.
		{"GET", "http://default.example/", passes, ""},
		{"CONNECT", "default.example:443", passes, ""},
		{"CONNECT", "default.example:80", refused, ""},
		{"GET", "http://default.example:443/", refused, ""},
		{"GET", "http://default.example:" + o + "/", refused, ""},
	} {
		status, body := request(t, "127.0.0.1", port, tc.method, tc.target)
		name := tc.method + " " + tc.target
		policy := status == http.StatusForbidden && strings.Contains(body, refusal)
		switch tc.want {
		case through:
			if status != http.StatusOK || body != "origin "+tc.from {
				t.Errorf("%s: %d %q; want 200 from the origin on %s", name, status, body, tc.from)
			}
		case passes:
			if policy {
				t.Errorf("%s: %d %q; want it let through", name, status, body)
			}
		case refused:
			if !policy {
				t.Errorf("%s: %d %q; want 403 naming the policy", name, status, body)
			}
		case stopped:
			if status == http.StatusOK || strings.HasPrefix(body, "origin ") {
				t.Errorf("%s: %d %q; want it stopped", name, status, body)
			}
		}
	}

	// A client the proxy does not serve is refused as a client, not for
	// its destination: squid answers its own access-denied page, tinyproxy
	// its 403 page with the cause "Access denied".
	status, body := request(t, "127.0.0.3", port, "GET", "http://api.partner.example:"+o+"/")
	if status != http.StatusForbidden {
		t.Errorf("a client not allowed: %d %q; want 403", status, body)
	}
	if server == Squid && strings.Contains(body, "Destination not allowed") {
		t.Errorf("a client not allowed is told its destination is: %q", body)
	}
	if server == Tinyproxy && !strings.Contains(body, "Access denied") {
		t.Errorf("a client not allowed: %q; want the cause Access denied", body)
	}
}

// The statistics page of the default tinyproxy, read as the operator's
// probe reads it: it counts every connection, the refusals of both kinds,
// and the connections open, and it is answered under a destination policy
// that does not list its name.
func TestStatsPageOnRealTinyproxy(t *testing.T) {
	requireServers(t, Tinyproxy)
	dir := t.TempDir()
	origin := startOrigins(t, "127.0.0.1")
	port := freePort(t)
	out, err := Render(Proxy{Hostname: "counted", Port: int32(port), Policy: "Proxy default/counted",
		AllowedClients: []string{"127.0.0.1/32"},
		Destinations:   []Destination{{Host: "api.partner.example", Ports: []int32{int32(origin)}}}})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "hosts"), "127.0.0.1 localhost api.partner.example other.partner.example\n")
	write(t, filepath.Join(dir, "resolv.conf"), "nameserver 127.0.0.1\n")
	stop := startServer(t, Tinyproxy, dir, port, out)
	defer stop()
	startRefusalsCounter(t, dir, out)
	stats := func() Stats {
		t.Helper()
		status, body := request(t, "127.0.0.1", port, "GET", "http://"+StatsHost+"/")
		s, ok := ParseStats([]byte(body))
		if status != http.StatusOK || !ok {
			t.Fatalf("the statistics page: %d %q", status, body)
		}
		return s
	}
	// openSettles reads the page until it counts want connections open
	// (the page's request among them): a connection closed a moment ago
	// is counted closed once its thread has finished with it.
	openSettles := func(want uint64, what string) Stats {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			s := stats()
			if s.Open == want {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("open connections %s: %d, want %d", what, s.Open, want)
			}
		}
	}
	o := strconv.Itoa(origin)
	// The baseline: two reads in a row that count only each other (the
	// connection startServer made to see the port open may be counted a
	// moment after it closed).
	before := openSettles(1, "while only the page's request is")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		next := stats()
		quiet := next.Connections == before.Connections+1 && next.Open == 1
		before = next
		if quiet {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page counts connections nobody made: %+v", next)
		}
	}
	for _, r := range []struct {
		from, target string
		want         int
	}{
		{"127.0.0.1", "http://api.partner.example:" + o + "/", http.StatusOK},
		{"127.0.0.1", "http://other.partner.example:" + o + "/", http.StatusForbidden}, // its destination
		{"127.0.0.3", "http://api.partner.example:" + o + "/", http.StatusForbidden},   // its client
	} {
		if status, body := request(t, r.from, port, "GET", r.target); status != r.want {
			t.Fatalf("GET %s from %s: %d %q, want %d", r.target, r.from, status, body, r.want)
		}
	}
	after := stats()
	if got := after.Connections - before.Connections; got != 4 {
		t.Errorf("connections counted for three requests and one read of the page: %d, want 4", got)
	}
	if got := after.Denied - before.Denied; got != 2 {
		t.Errorf("refusals counted for one destination and one client refused: %d, want 2", got)
	}
	// The refusals counter counts each kind.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s := stats()
		if s.ClientRefusals == before.ClientRefusals+1 && s.DestinationRefusals == before.DestinationRefusals+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refusals by kind: client %d, destination %d; want %d, %d", s.ClientRefusals, s.DestinationRefusals,
				before.ClientRefusals+1, before.DestinationRefusals+1)
		}
	}
	// A connection that has sent half its request is open.
	conn, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	fmt.Fprintf(conn, "GET http://api.partner.example:%s/ HTTP/1.1\r\n", o)
	openSettles(2, "with one held besides the page's request")
}

// startOrigins serves "origin <address>" on one port of every address.
func startOrigins(t *testing.T, addrs ...string) int {
	t.Helper()
	for attempt := 0; attempt < 20; attempt++ {
		port := freePort(t)
		var listeners []net.Listener
		for _, a := range addrs {
			l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", net.JoinHostPort(a, strconv.Itoa(port)))
			if err != nil {
				break
			}
			listeners = append(listeners, l)
		}
		if len(listeners) < len(addrs) {
			for _, l := range listeners {
				_ = l.Close()
			}
			continue
		}
		for i, l := range listeners {
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, "origin "+addrs[i])
			}), ReadHeaderTimeout: 10 * time.Second}
			go func() { _ = srv.Serve(l) }()
			t.Cleanup(func() { _ = srv.Close() })
		}
		return port
	}
	t.Fatalf("no port free on all of %v", addrs)
	return 0
}

// startRefusalsCounter runs the cloud-init's refusals counter on the log of
// the tinyproxy startServer runs in dir, as its unit runs it on the VM
// from the journal: sed stands in for journalctl --output=cat, which
// prints a message without the time and pid a log file's line starts
// with (log.c log_message).
func startRefusalsCounter(t *testing.T, dir string, cloudInit []byte) {
	t.Helper()
	script := filepath.Join(dir, "refusals.py")
	for _, f := range parse(t, cloudInit).WriteFiles {
		if f.Path == refusalsScriptPath {
			write(t, script, f.Content)
		}
	}
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("the cloud-init has no %s", refusalsScriptPath)
	}
	log := filepath.Join(dir, "log", "tinyproxy.log")
	pipeline := `tail -F -n +1 "$1" 2>/dev/null | sed -u 's/^[A-Z]* *[A-Z][a-z][a-z] [0-9]* [0-9:.]* \[[0-9]*\]: //' | exec python3 "$2" "$3"`
	startGroup(t, "the refusals counter", exec.CommandContext(t.Context(), "sh", "-c", pipeline, "counter", log, script, filepath.Join(dir, "root", statsPath)))
}

// startGroup starts cmd in a process group of its own, its output
// collected; stop kills the whole group (a pipeline's every process,
// squid's helpers) and waits, once. The test's end stops it, and a failed
// test logs what named said.
func startGroup(t *testing.T, named string, cmd *exec.Cmd) (output *syncBuffer, done <-chan struct{}, stop func()) {
	t.Helper()
	output = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = output, output
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop = sync.OnceFunc(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	t.Cleanup(stop)
	t.Cleanup(func() {
		if t.Failed() {
			stop()
			t.Logf("%s's output:\n%s", named, output.String())
		}
	})
	return output, exited, stop
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// localRun is what changes in a server's configuration to run it on
// loopback in the test: each old string must be there.
var localRun = map[Server]func(dir string, port int) [][2]string{
	Tinyproxy: func(dir string, port int) [][2]string {
		return [][2]string{
			{"Syslog On\n", "Listen 127.0.0.1\nLogFile \"" + dir + "/log/tinyproxy.log\"\nPidFile \"" + dir + "/log/tinyproxy.pid\"\n"},
		}
	},
	Squid: func(dir string, port int) [][2]string {
		return [][2]string{
			{fmt.Sprintf("http_port %d\n", port), fmt.Sprintf("http_port 127.0.0.1:%d\npid_filename %s/log/squid.pid\ncache_log %s/log/cache.log\n", port, dir, dir)},
			{"/var/log/squid/", dir + "/log/"},
			{"coredump_dir /var/spool/squid", "coredump_dir " + dir + "/log"},
		}
	},
}

// startServer puts the cloud-init's files in place in a mount namespace
// and runs the server there in the foreground, until the returned stop.
func startServer(t *testing.T, server Server, dir string, port int, cloudInit []byte) (stop func()) {
	t.Helper()
	logs := filepath.Join(dir, "log")
	if err := os.MkdirAll(logs, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(logs, 0o777); err != nil { // the server drops to its own user
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Dir(dir)} { // t.TempDir's are 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Every directory the cloud-init writes into is bound over by a copy
	// holding what was there and the cloud-init's files.
	script := []string{"set -e", "mount --bind " + dir + "/hosts /etc/hosts", "mount --bind " + dir + "/resolv.conf /etc/resolv.conf"}
	bound := map[string]bool{}
	for _, f := range parse(t, cloudInit).WriteFiles {
		// The VM's journal and services, not the server's: a test that reads
		// the refusals counter starts it itself (startRefusalsCounter).
		if strings.HasPrefix(f.Path, "/etc/systemd/") || f.Path == refusalsScriptPath {
			continue
		}
		content := f.Content
		if strings.HasSuffix(f.Path, ".conf") {
			for _, change := range localRun[server](dir, port) {
				if !strings.Contains(content, change[0]) {
					t.Fatalf("%s has no %q to change for a local run:\n%s", f.Path, change[0], content)
				}
				content = strings.ReplaceAll(content, change[0], change[1])
			}
		}
		staged := filepath.Join(dir, "root", f.Path)
		write(t, staged, content)
		if d := filepath.Dir(f.Path); !bound[d] {
			bound[d] = true
			script = append(script, fmt.Sprintf("cp -a -n %s/. %s/ 2>/dev/null || true", d, filepath.Dir(staged)),
				fmt.Sprintf("mount --bind %s %s", filepath.Dir(staged), d))
		}
	}
	args := map[Server][]string{
		Tinyproxy: {"tinyproxy", "-d", "-c", "/etc/tinyproxy/tinyproxy.conf"},
		Squid:     {"squid", "-N", "-d1", "-f", "/etc/squid/squid.conf"},
	}[server]
	script = append(script, `exec "$@"`)
	// squid's helpers (its pinger, its log daemon) are killed with it.
	output, done, stop := startGroup(t, string(server),
		exec.CommandContext(t.Context(), "unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", strings.Join(script, "\n"), "server"}, args...)...))
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(t.Context(), "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			_ = c.Close()
			return stop
		}
		select {
		case <-done:
			t.Fatalf("%s exited:\n%s", server, output.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen after 30 s:\n%s", server, output.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// request sends one request through the proxy from the address from and
// returns the status and body; for a CONNECT the proxy let through, the
// status and body of a GET sent through the tunnel.
func request(t *testing.T, from string, port int, method, target string) (int, string) {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	conn, err := d.DialContext(t.Context(), "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	host := strings.TrimPrefix(target, "http://")
	host, _, _ = strings.Cut(host, "/")
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", method, target, host)
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	if method == "CONNECT" && resp.StatusCode == http.StatusOK {
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
		if resp, err = http.ReadResponse(r, &http.Request{Method: http.MethodGet}); err != nil {
			t.Fatalf("GET through CONNECT %s: %v", target, err)
		}
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, string(body)
}

// syncBuffer is a bytes.Buffer safe for the server's two output streams.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
