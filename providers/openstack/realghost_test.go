package openstack

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
)

// ghostWatch watches the lane's provider traffic for a server that reads
// neither "deleting" nor DELETED after Nova accepted its delete (BUILD after a
// reschedule, ACTIVE after a build's clean-up: scheduling.go), the ghost
// the harness's delete rules met on the real services (docs/testing.md, "OpenStack's own
// services"). At the read it logs what the admin sees of the server
// (status, task_state, vm_state, host); when the test has failed, it
// prints the compute's and the conductor's log lines naming each such
// server, so a failure of these rules carries its own explanation.
type ghostWatch struct {
	t     *testing.T
	admin *admin

	mu      sync.Mutex
	deleted map[string]bool // servers whose DELETE or forceDelete Nova accepted
	ghosts  []string        // of those, the ones read other than deleting afterwards
}

// serverPath is a compute request on one server: its ID, and "/action"
// for a server action (the provider sends only forceDelete).
var serverPath = regexp.MustCompile(`/servers/([0-9a-f-]{36})(/action)?$`)

func watchGhosts(t *testing.T, rc *realCloud) *ghostWatch {
	g := &ghostWatch{t: t, admin: rc.admin, deleted: map[string]bool{}}
	t.Cleanup(g.explain)
	return g
}

// provider is rc.provider with the watch on its transport, after the
// wire's faults.
func (g *ghostWatch) provider(t *testing.T, rc *realCloud) *Provider {
	p := rc.provider(t)
	wire := p.wrapTransport
	p.wrapTransport = func(rt http.RoundTripper) http.RoundTripper { return g.wrap(wire(rt)) }
	return p
}

func (g *ghostWatch) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		m := serverPath.FindStringSubmatch(r.URL.Path)
		if err != nil || m == nil || resp.StatusCode >= 300 {
			return resp, err
		}
		id := m[1]
		switch {
		case r.Method == http.MethodDelete, r.Method == http.MethodPost && m[2] != "":
			g.mu.Lock()
			g.deleted[id] = true
			g.mu.Unlock()
		case r.Method == http.MethodGet && m[2] == "":
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(body))
			if rerr == nil {
				g.read(id, body)
			}
		}
		return resp, err
	})
}

// read notes a server read other than deleting after its delete, with
// the admin's view.
func (g *ghostWatch) read(id string, body []byte) {
	var got struct {
		Server struct {
			Status    string  `json:"status"`
			TaskState *string `json:"OS-EXT-STS:task_state"`
		} `json:"server"`
	}
	if json.Unmarshal(body, &got) != nil || got.Server.Status == "DELETED" || got.Server.TaskState != nil && *got.Server.TaskState == "deleting" {
		return
	}
	g.mu.Lock()
	ghost := g.deleted[id]
	if ghost && !slices.Contains(g.ghosts, id) {
		g.ghosts = append(g.ghosts, id)
	}
	g.mu.Unlock()
	if !ghost {
		return
	}
	s, err := servers.Get(context.Background(), g.admin.compute, id).Extract()
	if err != nil {
		g.t.Logf("ghost: server %s read %s after its delete; the admin's read: %v", id, got.Server.Status, err)
		return
	}
	g.t.Logf("ghost: server %s read %s after its delete; the admin's read: status %s, task_state %q, vm_state %s, host %q",
		id, got.Server.Status, s.Status, s.TaskState, s.VmState, s.Host)
}

// explain prints, for a failed test, the API's, compute's and
// conductor's log lines naming each server read other than deleting
// after its delete
// ($OS_STATE/logs/nova-*.log, the --log-file hack/openstack/up.sh gives).
func (g *ghostWatch) explain() {
	if !g.t.Failed() {
		return
	}
	g.mu.Lock()
	ghosts := append([]string(nil), g.ghosts...)
	g.mu.Unlock()
	if len(ghosts) == 0 {
		g.t.Log("ghost: no server read other than deleting after its delete in this test")
		return
	}
	dir := filepath.Join(os.Getenv("OS_STATE"), "logs")
	for _, id := range ghosts {
		for _, service := range []string{"nova-api", "nova-compute", "nova-conductor"} {
			lines := linesNaming(filepath.Join(dir, service+".log"), id, 40)
			g.t.Logf("ghost: %s's log lines naming %s (last %d):\n%s", service, id, len(lines), strings.Join(lines, "\n"))
		}
	}
}

// linesNaming is the last n lines of the file that contain s.
func linesNaming(path, s string, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return []string{err.Error()}
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			out = append(out, sc.Text())
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}
