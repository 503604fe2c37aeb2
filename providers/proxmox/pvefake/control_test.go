package pvefake

import (
	"net/url"
	"testing"
)

// FailCall answers the call it names, and only it, with the fault in
// PVE's form, before the call takes effect; Reset forgets a fault not yet
// met.
func TestFailCall(t *testing.T) {
	s := newTestServer(t, 9, nil)
	path := "/nodes/pve1/qemu/9000/config"
	put := func(desc string) answer { return call(t, s, "PUT", path, url.Values{"description": {desc}}) }
	const denied = "Permission check failed (/vms/9000, VM.Config.Options)"
	s.FailCall(2, 403, denied)
	if a := put("first"); a.status != 200 {
		t.Fatalf("call 1: got %d %q", a.status, a.reason)
	}
	if a := put("second"); a.status != 403 || a.reason != denied {
		t.Errorf("call 2: got %d %q, want 403 %q", a.status, a.reason, denied)
	}
	if conf, _ := s.Config(9000); conf["description"] != "first" {
		t.Errorf("the failed write took effect: description %q", conf["description"])
	}
	if a := put("third"); a.status != 200 {
		t.Errorf("call 3: got %d %q", a.status, a.reason)
	}
	s.FailCall(1, 500, "error writing '/var/lib/vz/images/9000/x' - No space left on device")
	s.Reset()
	if a := put("fourth"); a.status != 200 {
		t.Errorf("after Reset: got %d %q", a.status, a.reason)
	}
}
