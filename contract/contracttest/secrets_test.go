package contracttest

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// quietError hides its cause from its message, as a provider's "request
// failed" around an SDK error may.
type quietError struct{ cause error }

func (q quietError) Error() string { return "request failed" }
func (q quietError) Unwrap() error { return q.cause }

func TestErrorTextsWalkEveryCause(t *testing.T) {
	secret := errors.New("token s3cret")
	for name, err := range map[string]error{
		"wrapped":      quietError{secret},
		"joined":       errors.Join(errors.New("a"), quietError{secret}),
		"wrapped join": fmt.Errorf("x: %w", quietError{errors.Join(quietError{secret})}),
	} {
		texts := errorTexts(err)
		if !slices.ContainsFunc(texts, func(s string) bool { return strings.Contains(s, "s3cret") }) {
			t.Errorf("%s: errorTexts = %q, missing the cause's message", name, texts)
		}
	}
	if texts := errorTexts(quietError{}); len(texts) != 2 {
		t.Errorf("a nil cause: errorTexts = %q, want the error's own two", texts)
	}
}

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestUnpackedFindsGzipInEveryForm(t *testing.T) {
	const secret = "sentinel-cloudinit-0123"
	z := gzipped(t, "#cloud-config\n# "+secret+"\n")
	for name, text := range map[string]string{
		"raw":                   "body: " + string(z) + " end",
		"base64":                "userdata=" + base64.StdEncoding.EncodeToString(z) + "&x=1",
		"base64 URL":            `"ud":"` + base64.URLEncoding.EncodeToString(z) + `"`,
		"base64 unpadded":       base64.RawStdEncoding.EncodeToString(z) + " ",
		"second of two":         "H4sIAAAA " + base64.StdEncoding.EncodeToString(z),
		"cut off in a log line": base64.StdEncoding.EncodeToString(z)[:len(base64.StdEncoding.EncodeToString(z))-12],
	} {
		if !slices.ContainsFunc(unpacked(text), func(s string) bool { return strings.Contains(s, secret) }) {
			t.Errorf("%s: unpacked(%.60q) = %q, missing the secret", name, text, unpacked(text))
		}
	}
	if got := unpacked("no compressed data here, H4sI alone"); slices.ContainsFunc(got, func(s string) bool { return s != "" }) {
		t.Errorf("unpacked of plain text = %q, want nothing", got)
	}
}
