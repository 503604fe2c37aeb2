package pvefake

import (
	"sort"
	"strings"
)

// Served is one kind of call the fake served: the schema's method and
// path template and the parameter names sent (path parameters left out),
// for the provider's test that every call it makes is in its table.
type Served struct {
	Method, Path string
	Params       []string
}

// served records a call. Caller holds s.mu.
func (s *Server) served(ep *endpoint, params map[string]string) {
	vars := map[string]bool{}
	for _, seg := range ep.segs {
		if strings.HasPrefix(seg, "{") {
			vars[strings.Trim(seg, "{}")] = true
		}
	}
	var names []string
	for k := range params {
		if !vars[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	key := ep.Method + " " + ep.Path + " " + strings.Join(names, ",")
	if s.servedSet == nil {
		s.servedSet = map[string]Served{}
	}
	s.servedSet[key] = Served{Method: ep.Method, Path: ep.Path, Params: names}
}

// ServedCalls returns every kind of call served so far, sorted.
func (s *Server) ServedCalls() []Served {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := sortedKeys(s.servedSet)
	out := make([]Served, 0, len(keys))
	for _, k := range keys {
		out = append(out, s.servedSet[k])
	}
	return out
}
