package libvirt

import (
	"testing"

	"libvirt.org/go/libvirt"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

func TestStateTable(t *testing.T) {
	started := marks{Managed: "true", UID: "u", Started: "true"}
	fresh := marks{Managed: "true", UID: "u"}
	for _, tc := range []struct {
		name   string
		d      domain
		want   contract.State
		wantIP string
	}{
		{"defined, never started", domain{state: libvirt.DOMAIN_SHUTOFF, marks: fresh}, contract.StateProvisioning, ""},
		{"running, no address yet", domain{state: libvirt.DOMAIN_RUNNING, marks: started}, contract.StateProvisioning, ""},
		{"running with an address", domain{state: libvirt.DOMAIN_RUNNING, marks: started, ip: "192.168.151.120"}, contract.StateRunning, "192.168.151.120"},
		{"blocked with an address", domain{state: libvirt.DOMAIN_BLOCKED, marks: started, ip: "10.0.0.5"}, contract.StateRunning, "10.0.0.5"},
		{"paused while starting up", domain{state: libvirt.DOMAIN_PAUSED, reason: int(libvirt.DOMAIN_PAUSED_STARTING_UP), marks: started}, contract.StateProvisioning, ""},
		{"paused by a person", domain{state: libvirt.DOMAIN_PAUSED, reason: int(libvirt.DOMAIN_PAUSED_USER), marks: started}, contract.StateStopped, ""},
		{"paused (unknown): a failed KVM entry", domain{state: libvirt.DOMAIN_PAUSED, reason: int(libvirt.DOMAIN_PAUSED_UNKNOWN), marks: started}, contract.StateStopped, ""},
		{"shut off after running", domain{state: libvirt.DOMAIN_SHUTOFF, marks: started}, contract.StateStopped, ""},
		{"shutting down", domain{state: libvirt.DOMAIN_SHUTDOWN, marks: started}, contract.StateStopped, ""},
		{"crashed", domain{state: libvirt.DOMAIN_CRASHED, marks: started}, contract.StateStopped, ""},
		{"pmsuspended", domain{state: libvirt.DOMAIN_PMSUSPENDED, marks: started}, contract.StateStopped, ""},
		{"nostate", domain{state: libvirt.DOMAIN_NOSTATE, marks: started}, contract.StateStopped, ""},
		{"a state libvirt may add", domain{state: libvirt.DomainState(42), marks: started}, contract.StateStopped, ""},
	} {
		state, ip := stateOf(tc.d)
		if state != tc.want || ip != tc.wantIP {
			t.Errorf("%s: %s %q, want %s %q", tc.name, state, ip, tc.want, tc.wantIP)
		}
	}
}

func TestMarksRoundTrip(t *testing.T) {
	m := marks{Managed: "true", UID: "0e9d6c1a-7f3b-4d2e-9a5c-000000000001", CreatedAt: "2026-11-29T10:00:00Z", Started: "true"}
	got, err := parseMarks(`<other:x xmlns:other="urn:other"><other:uid>not-ours</other:uid></other:x>` + m.xml())
	if err != nil || got.Managed != m.Managed || got.UID != m.UID || got.CreatedAt != m.CreatedAt || !got.started() {
		t.Errorf("parseMarks(%s) = %+v, %v", m.xml(), got, err)
	}
	if none, err := parseMarks(`<other:x xmlns:other="urn:other"/>`); err != nil || none.Managed != "" {
		t.Errorf("foreign metadata only = %+v, %v; want no marks", none, err)
	}
}

// virDomainGetMetadata answers our element without its namespace (libvirt
// 9.0, test driver and daemon); the list reads the marks from that answer.
func TestParseMetadata(t *testing.T) {
	m := marks{Managed: "c0ffee12-meta", UID: "0e9d6c1a-7f3b-4d2e-9a5c-000000000002", CreatedAt: "2026-11-29T10:00:00Z", Started: "true"}
	for _, doc := range []string{m.bare(), m.xml()} {
		got, err := parseMetadata(doc)
		if err != nil || got.Managed != m.Managed || got.UID != m.UID || got.CreatedAt != m.CreatedAt || !got.started() {
			t.Errorf("parseMetadata(%s) = %+v, %v", doc, got, err)
		}
	}
}
