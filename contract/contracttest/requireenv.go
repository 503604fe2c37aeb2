package contracttest

import (
	"os"
	"strings"
	"testing"
)

// RequireEnv returns the variables prefix+name for each required name,
// keyed by name, or skips the test naming every one that is unset and the
// optional ones it would also read: a real-backend test without its
// backend says what to set, and never passes silently.
func RequireEnv(t *testing.T, backend, prefix string, required []string, optional ...string) map[string]string {
	t.Helper()
	vars, skip := readEnv(backend, prefix, required, optional)
	if skip != "" {
		t.Skip(skip)
	}
	return vars
}

// readEnv reads the variables; the skip message is empty when none of the
// required ones is missing.
func readEnv(backend, prefix string, required, optional []string) (map[string]string, string) {
	vars := map[string]string{}
	var missing []string
	for _, name := range required {
		vars[name] = os.Getenv(prefix + name)
		if vars[name] == "" {
			missing = append(missing, prefix+name)
		}
	}
	if len(missing) == 0 {
		return vars, ""
	}
	msg := "skipped: no " + backend + "; set " + strings.Join(missing, ", ")
	if len(optional) > 0 {
		msg += " (and optionally " + strings.Join(optional, ", ") + ")"
	}
	return vars, msg
}
