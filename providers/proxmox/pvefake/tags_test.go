package pvefake

import "testing"

// The rules of pve-guest-common's assert_tag_permissions and
// get_allowed_tags, one row each: which change of a VM's tags a token
// without (or with) Sys.Modify on / may make.
func TestAssertTagPermissions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		access   TagAccess
		old, new string
		refused  string // the tag named in the 403, "" for allowed
	}{
		{"free: any new tag", TagAccess{}, "", "a;b", ""},
		{"free: a registered tag", TagAccess{Registered: []string{"b"}}, "", "a;b", "b"},
		{"free: removing a registered tag", TagAccess{Registered: []string{"b"}}, "b", "", "b"},
		{"list: a listed tag", TagAccess{UserAllow: "list", UserAllowList: []string{"a"}}, "", "a", ""},
		{"list: an unlisted tag", TagAccess{UserAllow: "list", UserAllowList: []string{"a"}}, "", "a;c", "c"},
		{"list: keeping an unlisted tag is no change", TagAccess{UserAllow: "list"}, "c", "c", ""},
		{"list: removing an unlisted tag", TagAccess{UserAllow: "list"}, "c", "", "c"},
		{"existing: a tag another guest carries", TagAccess{UserAllow: "existing"}, "", "other", ""},
		{"existing: a new tag", TagAccess{UserAllow: "existing"}, "", "fresh", "fresh"},
		{"none: even a listed tag", TagAccess{UserAllow: "none", UserAllowList: []string{"a"}}, "", "a", "a"},
		{"none with Sys.Modify on /", TagAccess{UserAllow: "none", SysModify: true}, "", "a", ""},
		{"registered with Sys.Modify on /", TagAccess{Registered: []string{"a"}, SysModify: true}, "", "a", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{TagAccess: tc.access})
			defer s.Close()
			s.vms[500] = &vm{vmid: 500, node: "pve", conf: map[string]string{"tags": "other"}}
			s.mu.Lock()
			err := s.assertTagPermissions("egress@pve!operator", tc.old, tc.new)
			s.mu.Unlock()
			want := ""
			if tc.refused != "" {
				want = "Permission check failed (/, Sys.Modify for modifying tag '" + tc.refused + "')"
			}
			switch {
			case want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case want != "" && (err == nil || err.status != 403 || err.msg != want):
				t.Errorf("got %v, want 403 %s", err, want)
			}
		})
	}
}

// get_unique_tags: lower-cased, sorted, unique unless tag-style is
// case-sensitive.
func TestUniqueTags(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	if got := s.uniqueTags("B;a,b A"); got != "a;b" {
		t.Errorf("uniqueTags = %q, want a;b", got)
	}
	s.opts.TagAccess.CaseSensitive = true
	if got := s.uniqueTags("B;a,b A"); got != "A;B;a;b" {
		t.Errorf("case-sensitive uniqueTags = %q, want A;B;a;b", got)
	}
}
