package pvefake

import (
	"cmp"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// task is one worker task, named by its UPID.
type task struct {
	upid      string
	node      string
	typ, id   string
	user      string
	pid       int
	start     time.Time
	status    string // running, stopped
	exit      string // OK, WARNINGS: <n> or the error
	endtime   time.Time
	log       []string
	completed chan struct{}
}

// newTask registers a running task. Caller holds s.mu.
func (s *Server) newTask(node, typ, id, user string) *task {
	s.pid++
	now := time.Now()
	t := &task{node: node, typ: typ, id: id, user: user, pid: s.pid, start: now, status: "running", completed: make(chan struct{})}
	t.upid = fmt.Sprintf("UPID:%s:%08X:%08X:%08X:%s:%s:%s:", node, t.pid, s.pid*7, now.Unix(), typ, id, user)
	s.tasks[t.upid] = t
	return t
}

// finish ends t in the background once any hold on its type is released:
// with onOK applied, or, when an exit status was queued for its type, with
// that status: onOK for `WARNINGS: <n>` (a task that warned succeeded),
// onFail for any other. Caller holds s.mu.
func (s *Server) finish(t *task, exit string, onOK func(), onFail ...func(string)) {
	if queued, ok := s.taskExit[t.typ]; ok {
		delete(s.taskExit, t.typ)
		exit = queued
	}
	hold := s.hold[t.typ]
	go func() {
		if hold != nil {
			<-hold
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		ok := !statusIsError(exit)
		if ok {
			if onOK != nil {
				onOK()
			}
		} else {
			for _, f := range onFail {
				f(exit)
			}
		}
		switch {
		case ok:
			t.log = append(t.log, "TASK "+exit)
		case len(onFail) == 0:
			t.log = append(t.log, "TASK ERROR: "+exit)
		}
		t.status, t.exit, t.endtime = "stopped", exit, time.Now()
		close(t.completed)
	}()
}

// findTask is the lookup of pve-manager PVE/API2/Tasks.pm read_task_status
// and read_task_log: a parameter error (400) for a UPID that does not
// parse or whose task file the node serving the call lacks (a task of
// another node, or one never started).
func (s *Server) findTask(node, upid string) (*task, *apiError) {
	if !strings.HasPrefix(upid, "UPID:") {
		return nil, paramErr("upid", "unable to parse worker upid")
	}
	t, ok := s.tasks[upid]
	if !ok || t.node != node {
		return nil, paramErr("upid", "no such task")
	}
	return t, nil
}

// taskStatus is GET /nodes/{node}/tasks/{upid}/status.
func (s *Server) taskStatus(node, upid string) (any, *apiError) {
	t, err := s.findTask(node, upid)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"upid": t.upid, "node": t.node, "pid": t.pid, "pstart": t.pid * 7, "starttime": t.start.Unix(),
		"type": t.typ, "id": t.id, "user": t.user, "status": t.status}
	if t.status == "stopped" {
		out["exitstatus"] = t.exit
		out["endtime"] = t.endtime.Unix()
	}
	return out, nil
}

// taskLog is GET /nodes/{node}/tasks/{upid}/log: lines numbered from 1.
func (s *Server) taskLog(node, upid string) (any, *apiError) {
	t, err := s.findTask(node, upid)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for i, l := range t.log {
		out = append(out, map[string]any{"n": i + 1, "t": l})
	}
	return out, nil
}

// warningsRE is the exit status of a task that warned: fork_worker ends
// the task log with "TASK WARNINGS: <n>" when the worker called warn (its
// warning_count), and read_status returns "WARNINGS: <n>" (pve-common
// src/PVE/RESTEnvironment.pm fork_worker, src/PVE/UPID.pm read_status;
// PVE 8.4: src/PVE/Tools.pm upid_read_status).
var warningsRE = regexp.MustCompile(`^WARNINGS: \d+$`)

// statusIsError is pve-common's status_is_error (src/PVE/UPID.pm; PVE 8.4
// src/PVE/Tools.pm upid_status_is_error): only OK and WARNINGS: <n> are
// success; any other status, "unexpected status" included, is an error.
func statusIsError(exit string) bool { return exit != "OK" && !warningsRE.MatchString(exit) }

// taskList is GET /nodes/{node}/tasks (pve-manager PVE/API2/Tasks.pm
// node_tasks): the node's tasks the caller may see — its own (a token sees
// only its own tasks), or all with Sys.Audit on /nodes/{node} — filtered
// by typefilter, userfilter (a substring, case-insensitively) and vmid
// (the task's ID); source "active" (the default is "archive") lists the
// tasks of the node's active file, which the fake's running tasks are:
// status RUNNING, as node_tasks sets it for one without a status; a token's
// task carries user and tokenid apart (convert_token_task). Newest first,
// from start, at most limit (default 50). Caller holds s.mu.
func (s *Server) taskList(node string, params url.Values) []map[string]any {
	source := cmp.Or(params.Get("source"), "archive")
	auditor := s.can("/nodes/"+node, "Sys.Audit")
	limit, start := 50, 0
	if v, err := strconv.Atoi(params.Get("limit")); err == nil {
		limit = v
	}
	if v, err := strconv.Atoi(params.Get("start")); err == nil {
		start = v
	}
	var ts []*task
	for _, t := range s.tasks {
		running := t.status == "running"
		switch {
		case t.node != node,
			running && source == "archive", !running && source == "active",
			!auditor && t.user != s.opts.TokenID,
			params.Get("typefilter") != "" && t.typ != params.Get("typefilter"),
			params.Get("userfilter") != "" && !strings.Contains(strings.ToLower(t.user), strings.ToLower(params.Get("userfilter"))),
			params.Get("vmid") != "" && t.id != params.Get("vmid"):
			continue
		}
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].pid > ts[j].pid })
	out := []map[string]any{}
	for i, t := range ts {
		if i < start || len(out) >= limit {
			continue
		}
		m := map[string]any{"upid": t.upid, "node": t.node, "pid": t.pid, "pstart": t.pid * 7, "starttime": t.start.Unix(),
			"type": t.typ, "id": t.id, "user": t.user, "status": "RUNNING"}
		if user, token, ok := strings.Cut(t.user, "!"); ok {
			m["user"], m["tokenid"] = user, token
		}
		if t.status == "stopped" {
			m["status"], m["endtime"] = t.exit, t.endtime.Unix()
		}
		out = append(out, m)
	}
	return out
}
