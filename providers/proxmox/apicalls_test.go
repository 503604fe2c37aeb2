package proxmox

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/providers/proxmox/pvefake"
)

// fakes are every fake the package's tests started (startFakeOpts).
var fakes struct {
	sync.Mutex
	all []*pvefake.Server
}

func servedBy(s *pvefake.Server) {
	fakes.Lock()
	defer fakes.Unlock()
	fakes.all = append(fakes.all, s)
}

// TestMain runs the package's tests, then fails if any fake served a call
// the table (apiCalls) does not list, with every parameter it sent: the
// role the guide documents is generated from that table.
func TestMain(m *testing.M) {
	code := m.Run()
	if missing := callsMissingFromTable(); len(missing) > 0 {
		// stdout: go test shows it; a TestMain's stderr after PASS it drops.
		fmt.Fprintf(os.Stdout, "FAIL: calls the fakes served that apicalls.go does not list:\n  %s\n", strings.Join(missing, "\n  "))
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// testCalls are calls the tests make themselves on a fake, not the
// provider: classify_test.go writes an unknown config key to read the
// fake's 400; the LegacyCreator control rewrites a VM's marks as the
// previous release wrote them.
var testCalls = []pvefake.Served{
	{Method: "PUT", Path: "/nodes/{node}/qemu/{vmid}/config", Params: []string{"cicustom-nope"}},
	{Method: "PUT", Path: "/nodes/{node}/qemu/{vmid}/config", Params: []string{"description", "tags"}},
}

func callsMissingFromTable() []string {
	fakes.Lock()
	defer fakes.Unlock()
	seen := map[string]bool{}
	for _, s := range fakes.all {
		for _, c := range s.ServedCalls() {
			if inTable(c) || slices.ContainsFunc(testCalls, func(tc pvefake.Served) bool {
				return tc.Method == c.Method && tc.Path == c.Path && slices.Equal(tc.Params, c.Params)
			}) {
				continue
			}
			seen[fmt.Sprintf("%s %s %v", c.Method, c.Path, c.Params)] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// inTable reports whether a served call is one of the table's, sending no
// parameter the table's entry does not list.
func inTable(c pvefake.Served) bool {
	for _, e := range apiCalls {
		if e.method != c.Method || e.path != c.Path {
			continue
		}
		ok := true
		for _, p := range c.Params {
			if _, listed := e.params[p]; !listed {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// TestCallTableFindsAMissingCall: the check above fails for a call the
// table lacks (it is not vacuous).
func TestCallTableFindsAMissingCall(t *testing.T) {
	if inTable(pvefake.Served{Method: "PUT", Path: "/nodes/{node}/qemu/{vmid}/config", Params: []string{"sockets"}}) {
		t.Error("a config write of sockets counts as listed; the table has no sockets")
	}
	if !inTable(pvefake.Served{Method: "PUT", Path: "/nodes/{node}/qemu/{vmid}/config", Params: []string{"tags"}}) {
		t.Error("the tag write is not found in the table")
	}
}
