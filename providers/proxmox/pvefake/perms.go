package pvefake

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// ACE is one ACL entry of the token: privileges on a path, inherited by
// the paths below it when Propagate is set. Several entries on one path
// add up (two roles on one path).
type ACE struct {
	Path      string
	Privs     []string
	Propagate bool
}

// privileges lists every privilege a version knows, from pve-access-
// control src/PVE/AccessControl.pm $privgroups and $valid_privs:
// stable-bookworm for PVE 8; master for PVE 9, where commit 922f710 ("add
// VM.GuestAgent privileges") added VM.GuestAgent.*, 0706945 ("privileges:
// drop VM.Monitor") removed VM.Monitor and 5f7544f added VM.Replicate
// (pve-access-control 9.0.3, before PVE 9.1.3). A role holding a
// privilege its version does not know keeps the others: parse_user_config
// warns "user config - ignore invalid privilege '…'" and skips it, which
// is what a PVE 8 role becomes after the upgrade to 9.
var privileges = map[int][]string{
	8: strings.Fields(`Datastore.Allocate Datastore.AllocateSpace Datastore.AllocateTemplate Datastore.Audit
		Group.Allocate Mapping.Audit Mapping.Modify Mapping.Use Permissions.Modify Pool.Allocate Pool.Audit
		Realm.Allocate Realm.AllocateUser SDN.Allocate SDN.Audit SDN.Use Sys.AccessNetwork Sys.Audit
		Sys.Console Sys.Incoming Sys.Modify Sys.PowerMgmt Sys.Syslog User.Modify VM.Allocate VM.Audit
		VM.Backup VM.Clone VM.Config.CDROM VM.Config.CPU VM.Config.Cloudinit VM.Config.Disk
		VM.Config.HWType VM.Config.Memory VM.Config.Network VM.Config.Options VM.Console VM.Migrate
		VM.Monitor VM.PowerMgmt VM.Snapshot VM.Snapshot.Rollback`),
	9: strings.Fields(`Datastore.Allocate Datastore.AllocateSpace Datastore.AllocateTemplate Datastore.Audit
		Group.Allocate Mapping.Audit Mapping.Modify Mapping.Use Permissions.Modify Pool.Allocate Pool.Audit
		Realm.Allocate Realm.AllocateUser SDN.Allocate SDN.Audit SDN.Use Sys.AccessNetwork Sys.Audit
		Sys.Console Sys.Incoming Sys.Modify Sys.PowerMgmt Sys.Syslog User.Modify VM.Allocate VM.Audit
		VM.Backup VM.Clone VM.Config.CDROM VM.Config.CPU VM.Config.Cloudinit VM.Config.Disk
		VM.Config.HWType VM.Config.Memory VM.Config.Network VM.Config.Options VM.Console
		VM.GuestAgent.Audit VM.GuestAgent.FileRead VM.GuestAgent.FileSystemMgmt VM.GuestAgent.FileWrite
		VM.GuestAgent.Unrestricted VM.Migrate VM.PowerMgmt VM.Replicate VM.Snapshot VM.Snapshot.Rollback`),
}

// Privileges returns every privilege PVE version (8 or 9) knows.
func Privileges(version int) []string { return append([]string(nil), privileges[version]...) }

// permissions resolves the token's privileges on path as pve-access-
// control src/PVE/AccessControl.pm roles does: walking from / down to the
// path, the entries of the most specific path that has any (propagating
// ones above the path itself, all on it) replace what was inherited. A
// privilege-separated token's privileges are the intersection with its
// user's (RPCEnvironment.pm permissions); the fake models the token's
// ACL only, as if its user could do everything. Pools are not modelled.
// Caller holds s.mu.
func (s *Server) permissions(path string) map[string]bool {
	known := map[string]bool{}
	for _, p := range privileges[s.opts.Version] {
		known[p] = true
	}
	if s.opts.ACL == nil {
		return known // no ACL given: Administrator on /
	}
	path = normalizePath(path)
	var parts []string
	if path != "/" {
		parts = strings.Split(strings.TrimPrefix(path, "/"), "/")
	}
	out := map[string]bool{}
	for i := 0; i <= len(parts); i++ {
		at := "/" + strings.Join(parts[:i], "/")
		final := i == len(parts)
		var next map[string]bool
		for _, e := range s.opts.ACL {
			if normalizePath(e.Path) != at || (!final && !e.Propagate) {
				continue
			}
			if next == nil {
				next = map[string]bool{}
			}
			for _, p := range e.Privs {
				if known[p] {
					next[p] = true
				}
			}
		}
		if next != nil {
			out = next
		}
	}
	return out
}

// normalizePath is pve-access-control AccessControl.pm normalize_path:
// one leading slash, no trailing or doubled ones.
func normalizePath(p string) string {
	p = "/" + strings.Trim(p, "/")
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	return p
}

// permError is RPCEnvironment.pm's raise_perm_exc: 403 "Permission
// check failed" with what was missing in parentheses.
func permError(what string) *apiError {
	if what == "" {
		return fail(403, "Permission check failed")
	}
	return fail(403, "Permission check failed (%s)", what)
}

// check is RPCEnvironment.pm check: every privilege on path, the first
// missing one named ("/vms/100, VM.Audit"). It is the method handlers use
// for the checks their code makes beyond the schema's (codeChecks), e.g.
// s.check("/", "Sys.Modify") for a tag the cluster's user-tag-access does
// not allow (pve-guest-common GuestHelpers.pm assert_tag_permissions).
// Caller holds s.mu.
func (s *Server) check(path string, privs ...string) *apiError {
	perm := s.permissions(path)
	for _, p := range privs {
		if !perm[p] {
			return permError(normalizePath(path) + ", " + p)
		}
	}
	return nil
}

// checkAny is RPCEnvironment.pm check_any: one of privs on path.
func (s *Server) checkAny(path string, privs ...string) *apiError {
	perm := s.permissions(path)
	for _, p := range privs {
		if perm[p] {
			return nil
		}
	}
	return permError(normalizePath(path) + ", " + strings.Join(privs, "|"))
}

func (s *Server) can(path string, privs ...string) bool { return s.check(path, privs...) == nil }

// schemaCheck is RPCEnvironment.pm check_api2_permissions for a token:
// "user: all" passes (the handler checks), a "check" is evaluated as
// exec_api2_perm_check does, anything else is refused.
func (s *Server) schemaCheck(ep *endpoint, params map[string]string) *apiError {
	perm := ep.Permissions
	if perm != nil && perm.User == "all" {
		return nil
	}
	if perm == nil || len(perm.Check) == 0 {
		return permError("")
	}
	var check []any
	if err := json.Unmarshal(perm.Check, &check); err != nil {
		return fail(500, "pvefake: permission check of %s %s: %v", ep.Method, ep.Path, err)
	}
	ok, err := s.evalCheck(check, params, false)
	if err != nil {
		return err
	}
	if !ok {
		return permError("")
	}
	return nil
}

var templateRE = regexp.MustCompile(`\{(\w+)\}`)

// evalCheck is exec_api2_perm_check for the tests the fake's endpoints
// use: and, or, perm (with any and require_param). With noerr it reports
// false instead of the 403.
func (s *Server) evalCheck(check []any, params map[string]string, noerr bool) (bool, *apiError) {
	if len(check) == 0 {
		return false, fail(500, "no permission test specified")
	}
	switch check[0] {
	case "and":
		for _, sub := range check[1:] {
			if ok, err := s.evalCheck(asList(sub), params, noerr); !ok || err != nil {
				return ok, err
			}
		}
		return true, nil
	case "or":
		for _, sub := range check[1:] {
			if ok, _ := s.evalCheck(asList(sub), params, true); ok {
				return true, nil
			}
		}
		if noerr {
			return false, nil
		}
		return false, permError("")
	case "perm":
		if len(check) < 3 {
			return false, fail(500, "missing parameters")
		}
		tmpl, _ := check[1].(string)
		var privs []string
		for _, p := range asList(check[2]) {
			privs = append(privs, fmt.Sprint(p))
		}
		opts := map[string]any{}
		for i := 3; i+1 < len(check); i += 2 {
			opts[fmt.Sprint(check[i])] = check[i+1]
		}
		if rp, ok := opts["require_param"].(string); ok {
			if _, set := params[rp]; !set {
				if noerr {
					return false, nil
				}
				return false, permError("")
			}
		}
		// PVE::Tools::template_replace: {name} becomes the parameter.
		path := templateRE.ReplaceAllStringFunc(tmpl, func(m string) string { return params[strings.Trim(m, "{}")] })
		var err *apiError
		if truthyAny(opts["any"]) {
			err = s.checkAny(path, privs...)
		} else {
			err = s.check(path, privs...)
		}
		if err != nil {
			if noerr {
				return false, nil
			}
			return false, err
		}
		return true, nil
	}
	return false, fail(500, "pvefake: permission test %v not modelled", check[0])
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func truthyAny(v any) bool {
	switch x := v.(type) {
	case float64:
		return x != 0
	case string:
		return x != "" && x != "0"
	case bool:
		return x
	}
	return false
}

// atoiVMID reads a VMID parameter the schema already checked.
func atoiVMID(v string) int {
	n, _ := strconv.Atoi(v)
	return n
}
