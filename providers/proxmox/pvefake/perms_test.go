package pvefake

import (
	"net/url"
	"testing"
)

// TestPermissionsResolveAsPVE: the most specific ACL path that has
// entries replaces what is inherited; a non-propagating entry counts on
// its own path only; a privilege the version does not know is ignored
// (AccessControl.pm roles, parse_user_config).
func TestPermissionsResolveAsPVE(t *testing.T) {
	s := newTestServer(t, 9, []ACE{
		{Path: "/vms", Privs: []string{"VM.Audit", "VM.Monitor"}, Propagate: true},
		{Path: "/vms/9000", Privs: []string{"VM.Clone"}, Propagate: true},
		{Path: "/storage", Privs: []string{"Datastore.Audit"}},
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range []struct {
		path, priv string
		want       bool
	}{
		{"/vms/100", "VM.Audit", true},
		{"/vms/9000", "VM.Clone", true},
		{"/vms/9000", "VM.Audit", false},  // replaced by the more specific entry
		{"/vms/100", "VM.Monitor", false}, // not a PVE 9 privilege
		{"/storage", "Datastore.Audit", true},
		{"/storage/local", "Datastore.Audit", false}, // not propagated
		{"/", "Sys.Audit", false},
	} {
		if got := s.can(c.path, c.priv); got != c.want {
			t.Errorf("%s on %s: %v, want %v", c.priv, c.path, got, c.want)
		}
	}
}

// TestACLRefusals: what the token's ACL lacks is refused with PVE's 403
// and its text (RPCEnvironment.pm check, check_any, raise_perm_exc): the
// schema's checks and the handlers' own.
func TestACLRefusals(t *testing.T) {
	all := func(privs ...string) []ACE {
		return []ACE{{Path: "/", Privs: privs, Propagate: true}}
	}
	vmPrivs := []string{"VM.Audit", "VM.Clone", "VM.Allocate", "VM.Config.CDROM", "VM.Config.CPU", "VM.Config.Memory", "VM.Config.Options", "VM.PowerMgmt"}
	cases := []struct {
		name    string
		version int
		acl     []ACE
		method  string
		path    string
		form    url.Values
		reason  string
	}{
		{"schema perm", 9, all("VM.Clone"), "GET", "/nodes/pve1/qemu/9000/status/current", nil,
			"Permission check failed (/vms/9000, VM.Audit)"},
		{"schema and/or: no VM.Allocate on the new VMID", 9, all("VM.Clone"), "POST", "/nodes/pve1/qemu/9000/clone", url.Values{"newid": {"1000"}},
			"Permission check failed"},
		{"clone: the template's disk storage", 9, all(vmPrivs...), "POST", "/nodes/pve1/qemu/9000/clone", url.Values{"newid": {"1000"}},
			"Permission check failed (/storage/local-lvm, Datastore.AllocateSpace)"},
		{"clone: the template's bridge", 9, all(append(vmPrivs, "Datastore.AllocateSpace")...), "POST", "/nodes/pve1/qemu/9000/clone", url.Values{"newid": {"1000"}},
			"Permission check failed (/sdn/zones/localnetwork/vmbr0, SDN.Use)"},
		{"config: cores", 9, all("VM.Config.Memory"), "PUT", "/nodes/pve1/qemu/9000/config", url.Values{"cores": {"2"}},
			"Permission check failed (/vms/9000, VM.Config.CPU)"},
		{"config: the ISO's storage", 9, all("VM.Config.CDROM"), "PUT", "/nodes/pve1/qemu/9000/config", url.Values{"ide2": {"local:iso/seed.iso,media=cdrom"}},
			"Permission check failed (/storage/local, Datastore.AllocateSpace|Datastore.Audit)"},
		{"config: tags", 9, all("VM.Config.CPU"), "PUT", "/nodes/pve1/qemu/9000/config", url.Values{"tags": {"a"}},
			"Permission check failed (/vms/9000, VM.Config.Options)"},
		{"config: a root-only key", 9, all(vmPrivs...), "PUT", "/nodes/pve1/qemu/9000/config", url.Values{"args": {"-foo"}},
			"only root can set 'args' config"},
		{"agent on PVE 9", 9, all("VM.Audit"), "GET", "/nodes/pve1/qemu/9000/agent/network-get-interfaces", nil,
			"Permission check failed (/vms/9000, VM.GuestAgent.Audit|VM.GuestAgent.Unrestricted)"},
		{"agent on PVE 8", 8, all("VM.Audit"), "GET", "/nodes/pve1/qemu/9000/agent/network-get-interfaces", nil,
			"Permission check failed (/vms/9000, VM.Monitor)"},
		{"content delete", 9, all("Datastore.AllocateSpace", "Datastore.Audit"), "DELETE", "/nodes/pve1/storage/local/content/local:iso%2Fa.iso", nil,
			"Permission check failed (/storage/local, Datastore.Allocate)"},
		{"upload", 9, all("Datastore.Allocate"), "POST", "/nodes/pve1/storage/local/upload", url.Values{"content": {"iso"}, "filename": {"a.iso"}},
			"Permission check failed (/storage/local, Datastore.AllocateTemplate)"},
	}
	for _, c := range cases {
		s := newTestServer(t, c.version, c.acl)
		a := call(t, s, c.method, c.path, c.form)
		wantStatus := 403
		if c.name == "config: a root-only key" {
			wantStatus = 500
		}
		if a.status != wantStatus || a.reason != c.reason {
			t.Errorf("%s: got %d %q, want %d %q", c.name, a.status, a.reason, wantStatus, c.reason)
		}
	}
}

// TestListingsHideWhatTheTokenCannotSee: /cluster/resources lists only
// the VMs with VM.Audit (pve-manager API2/Cluster.pm resources).
func TestListingsHideWhatTheTokenCannotSee(t *testing.T) {
	s := newTestServer(t, 9, []ACE{{Path: "/vms/100", Privs: []string{"VM.Audit"}}})
	if _, err := s.CloneVM(9000, "visible"); err != nil {
		t.Fatal(err)
	}
	a := call(t, s, "GET", "/cluster/resources", url.Values{"type": {"vm"}})
	if a.status != 200 || string(a.data) == "" {
		t.Fatalf("got %d", a.status)
	}
	var got []map[string]any
	if err := jsonUnmarshal(a.data, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0]["vmid"] != float64(100) {
		t.Errorf("listed %v, want VM 100 alone (no VM.Audit on the template 9000)", got)
	}
}

// TestTagAccessAsksTheACL: under user-tag-access none, a tag write needs
// Sys.Modify on / (GuestHelpers.pm assert_tag_permissions), which the
// token's ACL answers.
func TestTagAccessAsksTheACL(t *testing.T) {
	for _, c := range []struct {
		privs  []string
		status int
		reason string
	}{
		{[]string{"VM.Config.Options"}, 403, "Permission check failed (/, Sys.Modify for modifying tag 'a')"},
		{[]string{"VM.Config.Options", "Sys.Modify"}, 200, "OK"},
	} {
		s := newTestServer(t, 9, []ACE{{Path: "/", Privs: c.privs, Propagate: true}})
		s.SetTagAccess(TagAccess{UserAllow: "none"})
		a := call(t, s, "PUT", "/nodes/pve1/qemu/9000/config", url.Values{"tags": {"a"}})
		if a.status != c.status || a.reason != c.reason {
			t.Errorf("with %v: got %d %q, want %d %q", c.privs, a.status, a.reason, c.status, c.reason)
		}
	}
}
