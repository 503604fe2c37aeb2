//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// serveImage serves the guest image over HTTP on hostIP, as a user's
// image server: the operator's Pod fetches it from there. It returns the
// URL, the image's SHA-256 and the gate every download waits at until the
// test opens it (the provider's HEAD checks pass through).
func serveImage(t *testing.T, path, hostIP string) (string, string, *imageGate) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	_ = f.Close()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", net.JoinHostPort(hostIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	gate := &imageGate{requested: make(chan struct{}), opened: make(chan struct{})}
	name := filepath.Base(path)
	mux := http.NewServeMux()
	mux.HandleFunc("/"+name, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gate.wait(r)
		}
		http.ServeFile(w, r, path)
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	// Opened before the server closes, so no download is left waiting.
	t.Cleanup(func() { _ = srv.Close() })
	t.Cleanup(gate.open)
	return "http://" + ln.Addr().String() + "/" + name, hex.EncodeToString(h.Sum(nil)), gate
}

// imageGate holds the image's downloads until it is opened. libvirt's
// Create fetches the image into the pool before it defines the domain
// (providers/libvirt/provider.go, build), so while the first download is
// held no domain can exist: the test reads the Proxy's status then, and
// whether the address came first does not depend on how fast it reads.
type imageGate struct {
	requested, opened chan struct{}
	once, askedOnce   sync.Once
}

func (g *imageGate) wait(r *http.Request) {
	g.askedOnce.Do(func() { close(g.requested) })
	select {
	case <-g.opened:
	case <-r.Context().Done():
	}
}

// open lets every download through, now and later.
func (g *imageGate) open() { g.once.Do(func() { close(g.opened) }) }

// asked reports whether a download has been requested (Create has begun).
func (g *imageGate) asked() bool {
	select {
	case <-g.requested:
		return true
	default:
		return false
	}
}

// origin is the HTTP server the proxied requests go to, on the bridge
// address: the only host besides the VMs on the lane's network. It
// records where each request came from.
type origin struct {
	URL string
	mu  sync.Mutex
	// from maps a request path to the source addresses it came from.
	from map[string][]string
}

// body is what the origin answers at path.
func (o *origin) body(path string) string { return "egress-e2e origin: " + path + "\n" }

func startOrigin(t *testing.T, hostIP string) *origin {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", net.JoinHostPort(hostIP, "0"))
	if err != nil {
		t.Fatalf("origin on the bridge address: %v", err)
	}
	o := &origin{URL: "http://" + ln.Addr().String(), from: map[string][]string{}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		o.mu.Lock()
		o.from[r.URL.Path] = append(o.from[r.URL.Path], host)
		o.mu.Unlock()
		_, _ = io.WriteString(w, o.body(r.URL.Path))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return o
}

// sources returns the source addresses of the requests for path.
func (o *origin) sources(path string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.from[path]...)
}
