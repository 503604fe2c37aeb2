package contracttest

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"

	"go.opentelemetry.io/otel"
)

// encodedForm is one way a secret can be written out.
type encodedForm struct{ how, text string }

// encodings returns secret as it is and as the encodings a provider might
// put it in before it leaks: base64 (standard and URL alphabets) at each of
// the three byte alignments the secret can have inside a longer payload,
// hex, and URL query escaping. A base64 form is the part of the encoding
// that does not depend on the bytes around the secret, so it is found
// wherever the secret sits in an encoded CloudInit.
func encodings(secret string) []encodedForm {
	forms := []encodedForm{{"as is", secret}, {"hex-encoded", hex.EncodeToString([]byte(secret))}}
	if q := url.QueryEscape(secret); q != secret {
		forms = append(forms, encodedForm{"URL-escaped", q})
	}
	for pad := range 3 {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			full := enc.EncodeToString(append(bytes.Repeat([]byte{0}, pad), secret...))
			// Drop the characters that mix in the padding bytes before and
			// the unknown bytes after.
			start, end := (pad*4+2)/3, len(full)-4
			if end-start >= 8 {
				forms = append(forms, encodedForm{"base64-encoded", full[start:end]})
			}
		}
	}
	return forms
}

// errorTexts returns the message of err and of every error it wraps
// (errorTree), each as Error() and %+v: a wrapper whose message hides
// its cause still hands the cause to whoever unwraps and logs it (an SDK
// error with the request in it, behind a provider's "request failed").
func errorTexts(err error) []string {
	var out []string
	for _, e := range errorTree(err) {
		out = append(out, e.Error(), fmt.Sprintf("%+v", e))
	}
	return out
}

// gzipMagic starts every gzip stream; gzipMagicBase64 starts its base64
// encoding in either alphabet (1f 8b 08: the only compression method).
const (
	gzipMagic       = "\x1f\x8b"
	gzipMagicBase64 = "H4sI"
)

// unpacked returns what text carries compressed: each gzip stream in
// it, as raw bytes or base64-encoded (standard or URL alphabet, padded or
// not), decompressed, as far as it is complete. A provider that gzips
// CloudInit for a size limit (vSphere's guestinfo, a config drive) and
// logs the result at debug level leaks it as surely as in plain text.
func unpacked(text string) []string {
	var out []string
	for i := strings.Index(text, gzipMagic); i >= 0; {
		out = append(out, gunzip([]byte(text[i:])))
		next := strings.Index(text[i+1:], gzipMagic)
		if next < 0 {
			break
		}
		i += 1 + next
	}
	for i := strings.Index(text, gzipMagicBase64); i >= 0; {
		run := text[i:]
		end := strings.IndexFunc(run, func(r rune) bool { return !isBase64Char(r) })
		if end >= 0 {
			run = run[:end]
		}
		run = run[:len(run)/4*4] // whole quanta: a cut-off tail is not an error
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			if raw, err := enc.DecodeString(run); err == nil {
				out = append(out, gunzip(raw))
			}
		}
		next := strings.Index(text[i+1:], gzipMagicBase64)
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return out
}

func isBase64Char(r rune) bool {
	return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("+/-_=", r)
}

// maxUnpacked bounds what gunzip inflates, against a stream that
// inflates without end.
const maxUnpacked = 1 << 20

// gunzip inflates the gzip stream at the start of b, keeping what came
// out before any error (a stream cut off in a log line still shows its
// start).
func gunzip(b []byte) string {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return ""
	}
	var out bytes.Buffer
	_, _ = io.Copy(&out, io.LimitReader(zr, maxUnpacked))
	return out.String()
}

// globalOutput captures what the process writes outside the logger the
// operator hands the provider: os.Stderr, the standard library's log and
// slog defaults, and OpenTelemetry's global error handler and logger. An
// SDK that logs on its own (a debug dump of a request, a retry notice)
// writes there.
type globalOutput struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	done chan struct{}
}

func (g *globalOutput) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}

func (g *globalOutput) text() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.String()
}

// captureGlobals redirects the process-wide outputs into the rule's
// texts until stop is called (or the rule ends); stop waits until every
// byte written is in. Rules run one after another, so no other rule's
// output mixes in.
func (e *env) captureGlobals() (stop func()) {
	g := &globalOutput{done: make(chan struct{})}
	r, w, err := os.Pipe()
	if err != nil {
		e.t.Fatalf("capture stderr: %v", err)
	}
	go func() {
		defer close(g.done)
		_, _ = io.Copy(g, r)
	}()
	stderr, logOut, logFlags, slogDefault := os.Stderr, log.Writer(), log.Flags(), slog.Default()
	errHandler := otel.GetErrorHandler()
	os.Stderr = w
	slog.SetDefault(slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})))
	log.SetOutput(w)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { _, _ = io.WriteString(w, err.Error()+"\n") }))
	e.mu.Lock()
	e.globals = g
	e.mu.Unlock()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			os.Stderr = stderr
			slog.SetDefault(slogDefault)
			log.SetOutput(logOut)
			log.SetFlags(logFlags)
			otel.SetErrorHandler(errHandler)
			_ = w.Close()
			<-g.done
			_ = r.Close()
		})
	}
	e.t.Cleanup(stop)
	return stop
}
