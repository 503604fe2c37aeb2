package openstack

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// wire is the connection between the provider and a real cloud, as the
// load balancer in front of the APIs sees it: it counts the calls, cuts
// one (the load balancer's 502, before the API saw the request or after
// it acted), holds every call while stalled, sends a request the way
// that makes the real service answer with a fault, and records what went
// by. Every provider of one test shares it (Provider.wrapTransport), as
// every operator shares a cloud's front.
type wire struct {
	mu      sync.Mutex
	calls   int
	cut     wireCut
	stalled chan struct{} // closed on release; nil when not stalled
	faults  []*wireFault
	tokens  []string // the tokens the provider sent, newest last
	record  bool
	log     []exchange
}

type wireCut struct {
	at    int // call number; 0 when none is set
	after bool
}

// wireFault acts on the next request matching method and path: it
// answers for the API (status, body: the load balancer's own answer, the
// request never sent), or rewrites the request so the real service
// answers it with its own fault, or loses the answer once the service
// acted; undo runs once the real answer is in (it puts back what the
// admin changed to cause the fault).
type wireFault struct {
	method  string
	path    *regexp.Regexp
	status  int
	body    string
	rewrite func(*http.Request)
	lose    bool
	undo    func()
}

// exchange is one recorded call: the request and the answer.
type exchange struct {
	Method, Path, Query string
	Header              http.Header
	ReqBody             []byte
	Status              int
	RespBody            []byte
}

func newWire() *wire { return &wire{} }

// wrap is Provider.wrapTransport.
func (w *wire) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) { return w.roundTrip(next, r) })
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// badGateway is HAProxy's answer when the API's connection broke (the
// same text osfake's cut gives).
const badGateway = "<html><body><h1>502 Bad Gateway</h1>\nThe server returned an invalid or incomplete response.\n</body></html>\n"

// unavailable is a load balancer's 503 while no API backend is up.
const unavailable = "<html><body><h1>503 Service Unavailable</h1>\nNo server is available to handle this request.\n</body></html>\n"

func (w *wire) roundTrip(next http.RoundTripper, r *http.Request) (*http.Response, error) {
	w.mu.Lock()
	stall := w.stalled
	w.mu.Unlock()
	if stall != nil {
		select {
		case <-stall:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	w.mu.Lock()
	w.calls++
	n := w.calls
	cut := w.cut
	if cut.at == n {
		w.cut = wireCut{}
	}
	var f *wireFault
	for i, c := range w.faults {
		if (c.method == "" || slices.Contains(strings.Split(c.method, "|"), r.Method)) && c.path.MatchString(r.URL.Path) {
			f = c
			w.faults = append(w.faults[:i:i], w.faults[i+1:]...)
			break
		}
	}
	if tok := r.Header.Get("X-Auth-Token"); tok != "" && (len(w.tokens) == 0 || w.tokens[len(w.tokens)-1] != tok) {
		w.tokens = append(w.tokens, tok)
	}
	w.mu.Unlock()

	switch {
	case cut.at == n && !cut.after:
		return answer(r, http.StatusBadGateway, badGateway), nil
	case f != nil && f.status != 0:
		return answer(r, f.status, f.body), nil
	case f != nil && f.rewrite != nil:
		r = r.Clone(r.Context())
		f.rewrite(r)
	}
	var reqBody []byte
	if w.recording() && r.Body != nil {
		reqBody, _ = io.ReadAll(r.Body)
		_ = r.Body.Close()
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := next.RoundTrip(r)
	if f != nil && f.undo != nil {
		f.undo()
	}
	if err != nil {
		return nil, err
	}
	if (cut.at == n && cut.after) || (f != nil && f.lose) {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return answer(r, http.StatusBadGateway, badGateway), nil
	}
	if w.recording() {
		body, rerr := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if rerr != nil {
			return nil, rerr
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		w.mu.Lock()
		w.log = append(w.log, exchange{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(),
			ReqBody: reqBody, Status: resp.StatusCode, RespBody: body})
		w.mu.Unlock()
	}
	return resp, nil
}

func (w *wire) recording() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.record
}

// answer is a response the wire gives in the API's place.
func answer(r *http.Request, status int, body string) *http.Response {
	return &http.Response{
		Status: httpStatus(status), StatusCode: status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"text/html"}},
		Body:    io.NopCloser(strings.NewReader(body)),
		Request: r, ContentLength: int64(len(body)),
	}
}

// Calls counts the calls that went through the wire.
func (w *wire) Calls() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls
}

// cutCall cuts the n-th call from now.
func (w *wire) cutCall(n int, after bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cut = wireCut{at: w.calls + n, after: after}
}

// stall holds every call until release.
func (w *wire) stall() (release func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stalled == nil {
		w.stalled = make(chan struct{})
	}
	ch := w.stalled
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.stalled == ch {
			close(ch)
			w.stalled = nil
		}
	}
}

func (w *wire) add(f *wireFault) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.faults = append(w.faults, f)
}

// reset drops the cut and the faults still queued (their undo runs: what
// the admin changed is put back) and lets stalled calls go.
func (w *wire) reset() {
	w.mu.Lock()
	pending := w.faults
	w.faults, w.cut = nil, wireCut{}
	if w.stalled != nil {
		close(w.stalled)
		w.stalled = nil
	}
	w.mu.Unlock()
	for _, f := range pending {
		if f.undo != nil {
			f.undo()
		}
	}
}

// lastToken is the last Keystone token the provider sent.
func (w *wire) lastToken() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.tokens) == 0 {
		return ""
	}
	return w.tokens[len(w.tokens)-1]
}

// startRecording clears the log and records from now; exchanges returns
// what was recorded.
func (w *wire) startRecording() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.record, w.log = true, nil
}

func (w *wire) exchanges() []exchange {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]exchange(nil), w.log...)
}
