package controllertest

import "testing"

// Count holds a line only when it has every part, and String keeps the
// lines in order.
func TestLogsCountNeedsEveryPart(t *testing.T) {
	l := &Logs{}
	l.write("a", `"provider"="one" failed`)
	l.write("a", `"provider"="two" failed`)
	l.write("a", `"provider"="one" ok`)
	if n := l.Count("failed", `"provider"="one"`); n != 1 {
		t.Errorf("Count(failed, one) = %d, want 1", n)
	}
	if n := l.Count("failed"); n != 2 {
		t.Errorf("Count(failed) = %d, want 2", n)
	}
	if n := l.Count(); n != 3 {
		t.Errorf("Count() = %d, want 3 (no part: every line)", n)
	}
	if got, want := l.String(), "a \"provider\"=\"one\" failed\na \"provider\"=\"two\" failed\na \"provider\"=\"one\" ok"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
