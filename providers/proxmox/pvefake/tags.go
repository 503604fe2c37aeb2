package pvefake

import (
	"slices"
	"sort"
	"strings"
)

// TagAccess is the part of datacenter.cfg that rules who may set which
// tags (pve-cluster src/PVE/DataCenterConfig.pm: user-tag-access,
// registered-tags, tag-style).
type TagAccess struct {
	// UserAllow is user-tag-access's user-allow: "free" (the default, any
	// tag), "list" (UserAllowList only), "existing" (UserAllowList and
	// every tag some guest already carries) or "none".
	UserAllow string
	// UserAllowList is user-tag-access's user-allow-list.
	UserAllowList []string
	// Registered are registered-tags: only a privileged user may set or
	// delete them, whatever UserAllow says.
	Registered []string
	// CaseSensitive is tag-style's case-sensitive; by default PVE stores
	// tags lower-cased.
	CaseSensitive bool
	// SysModify says the token holds Sys.Modify on "/", which lifts every
	// restriction above, when Options.ACL is nil. With an ACL, the ACL
	// answers RPCEnvironment's check($user, '/', ['Sys.Modify']) and this
	// field is ignored.
	SysModify bool
}

// SetTagAccess changes datacenter.cfg's tag settings, as an administrator
// at Datacenter → Options would.
func (s *Server) SetTagAccess(ta TagAccess) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.TagAccess = ta
}

// sysModifyOnRoot is the one privilege tag access asks about: the
// token's ACL (s.can), or TagAccess.SysModify without one. Caller holds
// s.mu.
func (s *Server) sysModifyOnRoot(string) bool {
	if s.opts.ACL != nil {
		return s.can("/", "Sys.Modify")
	}
	return s.opts.TagAccess.SysModify
}

// assertTagPermissions is pve-guest-common src/PVE/GuestHelpers.pm
// assert_tag_permissions (PVE 8.4 and 9.1): every tag whose count differs
// between the old and the new list — added or removed — must be allowed;
// a user with Sys.Modify on / may change any. Caller holds s.mu.
func (s *Server) assertTagPermissions(user, oldTags, newTags string) *apiError {
	if s.sysModifyOnRoot(user) {
		return nil
	}
	count := func(list string) map[string]int {
		m := map[string]int{}
		for _, t := range splitList(list) {
			m[t]++
		}
		return m
	}
	before, after := count(oldTags), count(newTags)
	all := map[string]bool{}
	for t := range before {
		all[t] = true
	}
	for t := range after {
		all[t] = true
	}
	changed := make([]string, 0, len(all))
	for t := range all {
		if before[t] != after[t] {
			changed = append(changed, t)
		}
	}
	sort.Strings(changed) // PVE walks a hash: any one refused tag is named
	allowed, registered, free := s.allowedTags()
	for _, t := range changed {
		if (!allowed[t] && !free) || registered[t] {
			// PVE::Exception raise_perm_exc: 403 "Permission check failed (…)".
			return fail(403, "Permission check failed (/, Sys.Modify for modifying tag '%s')", t)
		}
	}
	return nil
}

// allowedTags is GuestHelpers.pm get_allowed_tags for a user without
// Sys.Modify on /: the allow-list unless UserAllow is none, every tag a
// guest carries under free and existing (the token is taken to audit every
// VM), the registered tags never. Caller holds s.mu.
func (s *Server) allowedTags() (allowed, registered map[string]bool, free bool) {
	ta := s.opts.TagAccess
	mode := ta.UserAllow
	if mode == "" {
		mode = "free"
	}
	allowed, registered = map[string]bool{}, map[string]bool{}
	for _, t := range ta.Registered {
		registered[t] = true
	}
	if mode != "none" {
		for _, t := range ta.UserAllowList {
			allowed[t] = true
		}
	}
	if mode == "free" || mode == "existing" {
		for _, v := range s.vms {
			for _, t := range splitList(v.conf["tags"]) {
				allowed[t] = true
			}
		}
	}
	for t := range registered {
		delete(allowed, t)
	}
	return allowed, registered, mode == "free"
}

// uniqueTags is GuestHelpers.pm get_unique_tags: lower-cased unless
// tag-style is case-sensitive, sorted, unique, ';'-joined. Caller holds
// s.mu.
func (s *Server) uniqueTags(list string) string {
	cs := s.opts.TagAccess.CaseSensitive
	tags := splitList(list)
	sort.SliceStable(tags, func(i, j int) bool {
		if cs {
			return tags[i] < tags[j]
		}
		return strings.ToLower(tags[i]) < strings.ToLower(tags[j])
	})
	var out []string
	for _, t := range tags {
		if !cs {
			t = strings.ToLower(t)
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return strings.Join(out, ";")
}
