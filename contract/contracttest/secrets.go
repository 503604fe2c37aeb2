package contracttest

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"io"
	"log"
	"log/slog"
	"net/url"
	"os"
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
