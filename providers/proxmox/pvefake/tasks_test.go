package pvefake

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"testing"
)

// TestTaskListShowsOwnTasks: the node's task list shows the token its own
// tasks, and others' only with Sys.Audit on the node; source active lists
// running tasks, archive (the default) ended ones (pve-manager
// API2/Tasks.pm node_tasks).
func TestTaskListShowsOwnTasks(t *testing.T) {
	for _, c := range []struct {
		privs []string
		want  []string // users of the listed active tasks
	}{
		{nil, []string{"egress@pve"}},
		{[]string{"Sys.Audit"}, []string{"egress@pve", "root@pam"}},
	} {
		s := newTestServer(t, 9, []ACE{{Path: "/nodes/pve1", Privs: c.privs}, {Path: "/storage/local", Privs: []string{"Datastore.AllocateTemplate"}}})
		s.mu.Lock()
		other := s.newTask("pve1", "imgcopy", "", "root@pam") // running
		s.mu.Unlock()
		release := s.HoldTasks("imgcopy")
		up := uploadISO(t, s, "a.iso")
		if up.status != 200 {
			t.Fatalf("upload: %d %q", up.status, up.reason)
		}
		a := call(t, s, "GET", "/nodes/pve1/tasks", url.Values{"source": {"active"}, "typefilter": {"imgcopy"}})
		var got []map[string]any
		if err := jsonUnmarshal(a.data, &got); err != nil || a.status != 200 {
			t.Fatalf("task list: %d %v", a.status, err)
		}
		var users []string
		for _, task := range got {
			users = append(users, task["user"].(string))
			if task["status"] != "RUNNING" {
				t.Errorf("an active task has status %v, want RUNNING", task["status"])
			}
		}
		slices.Sort(users)
		if !slices.Equal(users, c.want) {
			t.Errorf("with %v on /nodes/pve1: listed tasks of %v, want %v", c.privs, users, c.want)
		}
		release()
		s.mu.Lock()
		s.finish(other, "OK", nil)
		s.mu.Unlock()
		s.WaitTasks()
		a = call(t, s, "GET", "/nodes/pve1/tasks", url.Values{"userfilter": {"egress"}})
		if err := jsonUnmarshal(a.data, &got); err != nil || len(got) != 1 || got[0]["status"] != "OK" || got[0]["tokenid"] != "operator" {
			t.Errorf("archive after the copy: %v (%v), want the ended upload, OK, tokenid operator", got, err)
		}
	}
}

// uploadISO uploads a small file as an ISO to local on pve1.
func uploadISO(t *testing.T, s *Server, name string) answer {
	t.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	_ = w.WriteField("content", "iso")
	fw, err := w.CreateFormFile("filename", name)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write([]byte("not really an ISO"))
	_ = w.Close()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.BaseURL()+"/nodes/pve1/storage/local/upload", &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	req.Header.Set("Authorization", "PVEAPIToken="+tTokenID+"="+tSecret)
	res, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	return answer{status: res.StatusCode, reason: res.Status}
}
