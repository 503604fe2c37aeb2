package proxmox

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/providers/proxmox/pvefake"
)

var updateRoleDoc = flag.Bool("update-role-doc", false, "rewrite the generated role in docs/proxmox-provider.md")

const (
	roleName      = "EgressProxies"
	roleDocBegin  = "<!-- BEGIN GENERATED ROLE: make proxmox-role-doc -->"
	roleDocEnd    = "<!-- END GENERATED ROLE -->"
	roleDocTokens = "'egress@pve!operator'"
)

// aclPath is the ACL path that grants a requirement's path: every VM
// (the template, the new VMID) through /vms, a VLAN through its bridge.
func aclPath(p string) string {
	if strings.HasPrefix(p, "/vms/") {
		return "/vms"
	}
	// A bridge's ACL, propagated, covers its VLANs (/<bridge>/<tag>).
	if b, ok := strings.CutSuffix(p, "/<vlan>"); ok {
		return b
	}
	return p
}

// tokenRole is the role the provider's calls need on PVE version, and the
// ACL paths (with the table's placeholders) to grant it on.
func tokenRole(t testing.TB, version int) (privs, paths []string) {
	t.Helper()
	var reqs []pvefake.Requirement
	for _, name := range slices.Sorted(maps.Keys(apiCalls)) {
		c := apiCalls[name]
		r, err := pvefake.Requirements(version, c.method, c.path, c.params)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		reqs = append(reqs, r...)
	}
	return pvefake.Role(reqs, aclPath)
}

// testACL is the generated role on the generated paths, the table's
// placeholders bound to the test cluster's storages (<isoStorage> to each
// that takes ISOs, <storage> and <templateStorage> to each that takes
// disk images) and bridges (vmbr0, the template's; vmbr1, a zone network's in
// the tests), propagated as pveum acl modify does by
// default: the fake's ACL in the provider's tests, so the harness proves
// the documented role is enough.
func testACL(t testing.TB, version int, storages []pvefake.StorageSpec) []pvefake.ACE {
	privs, paths := tokenRole(t, version)
	values := map[string][]string{"<templateBridge>": {"vmbr0"}, "<bridge>": {"vmbr0", "vmbr1"}}
	for _, st := range storages {
		if slices.Contains(st.Content, "iso") {
			values["<isoStorage>"] = append(values["<isoStorage>"], st.Name)
		}
		if slices.Contains(st.Content, "images") {
			values["<storage>"] = append(values["<storage>"], st.Name)
			values["<templateStorage>"] = append(values["<templateStorage>"], st.Name)
		}
	}
	var acl []pvefake.ACE
	for _, p := range paths {
		bound := []string{p}
		for ph, vs := range values {
			if strings.Contains(p, ph) {
				bound = nil
				for _, v := range vs {
					bound = append(bound, strings.ReplaceAll(p, ph, v))
				}
			}
		}
		for _, b := range bound {
			acl = append(acl, pvefake.ACE{Path: b, Privs: privs, Propagate: true})
		}
	}
	return acl
}

// roleDoc renders the generated part of the guide.
func roleDoc(t testing.TB) string {
	var b strings.Builder
	b.WriteString(roleDocBegin + "\n")
	for _, version := range []int{9, 8} {
		privs, paths := tokenRole(t, version)
		fmt.Fprintf(&b, "\nPVE %d:\n\n```sh\n", version)
		fmt.Fprintf(&b, "pveum role add %s --privs \"%s\"\n", roleName, strings.Join(privs, " "))
		// A privilege-separated token holds what its own ACL and its
		// user's both grant (pve-access-control AccessControl.pm
		// permission), so the user gets the role on the same paths.
		b.WriteString("pveum user add egress@pve\n")
		b.WriteString("pveum user token add egress@pve operator --privsep 1\n")
		for _, p := range paths {
			fmt.Fprintf(&b, "pveum acl modify %s --users egress@pve --tokens %s --roles %s\n", p, roleDocTokens, roleName)
		}
		b.WriteString("```\n")
	}
	b.WriteString("\n" + roleDocEnd)
	return b.String()
}

// TestRoleDoc fails when the role in docs/proxmox-provider.md is not the
// one the call table and the pinned schemas give (make proxmox-role-doc
// rewrites it).
func TestRoleDoc(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "proxmox-provider.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	i, j := strings.Index(text, roleDocBegin), strings.Index(text, roleDocEnd)
	if i < 0 || j < i {
		t.Fatalf("%s: no %q … %q block", path, roleDocBegin, roleDocEnd)
	}
	want := roleDoc(t)
	got := text[i : j+len(roleDocEnd)]
	if got == want {
		return
	}
	if *updateRoleDoc {
		if err := os.WriteFile(path, []byte(text[:i]+want+text[j+len(roleDocEnd):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the generated role is stale; run make proxmox-role-doc. Want:\n%s", path, want)
}

// oldRole is the role the guide documented before it was generated: no
// Datastore.Allocate, VM.Monitor for the agent.
var oldRole = strings.Fields("VM.Allocate VM.Clone VM.Audit VM.Config.CPU VM.Config.Memory VM.Config.CDROM VM.Config.Options VM.PowerMgmt VM.Monitor Datastore.AllocateTemplate Datastore.Audit Datastore.AllocateSpace SDN.Use")

// TestOldDocumentedRoleFails: with the old role on the documented paths,
// deleting the seed is refused on PVE 8 and 9 (pve-storage Content.pm
// delete needs Datastore.Allocate) and the guest agent read on PVE 9
// (VM.GuestAgent.Audit; VM.Monitor no longer exists), with PVE's 403.
func TestOldDocumentedRoleFails(t *testing.T) {
	for _, version := range []int{8, 9} {
		t.Run(fmt.Sprintf("pve%d", version), func(t *testing.T) {
			f := startFakeOpts(t, func(o *pvefake.Options) {
				o.Version = version
				for _, p := range []string{"/vms", "/storage/local", "/storage/local-lvm", "/sdn/zones/localnetwork/vmbr0"} {
					o.ACL = append(o.ACL, pvefake.ACE{Path: p, Privs: oldRole, Propagate: true})
				}
			})
			p := f.provider(t)
			ctx := t.Context()
			inst, err := p.Create(ctx, request("oldrole", testUID(31)))
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			vmid, _ := vmidOf(inst.ProviderID)
			if err := f.s.ReportIP(vmid, "192.0.2.31"); err != nil {
				t.Fatal(err)
			}
			_, err = p.Get(ctx, inst.ProviderID)
			wantAgent := fmt.Sprintf("403 Permission check failed (/vms/%d, VM.GuestAgent.Audit|VM.GuestAgent.Unrestricted)", vmid)
			switch {
			case version == 9 && (err == nil || !strings.Contains(err.Error(), wantAgent)):
				t.Errorf("Get on PVE 9 with VM.Monitor: %v, want %q", err, wantAgent)
			case version == 8 && err != nil:
				t.Errorf("Get on PVE 8 with VM.Monitor: %v", err)
			}
			err = p.Delete(ctx, inst.ProviderID)
			if want := "403 Permission check failed (/storage/local, Datastore.Allocate)"; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Delete: %v, want the seed delete refused: %q", err, want)
			}
		})
	}
}
