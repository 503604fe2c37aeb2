package cloudinit

import (
	"strings"
	"testing"
)

func TestParseStats(t *testing.T) {
	page := strings.NewReplacer("{opens}", "3", "{reqs}", "120", "{badconns}", "4", "{deniedconns}", "7", "{refusedconns}", "0",
		"client-refusals 0", "client-refusals 2", "destination-refusals 0", "destination-refusals 5").Replace(tinyproxyStats)
	got, ok := ParseStats([]byte(page))
	if want := (Stats{Open: 3, Connections: 120, Bad: 4, Denied: 7, ClientRefusals: 2, DestinationRefusals: 5}); !ok || got != want {
		t.Errorf("ParseStats(the page) = %+v, %v; want %+v, true", got, ok, want)
	}
	for name, body := range map[string]string{
		"another server's page": "<html><body>Number of requests: 3</body></html>",
		"no header":             strings.SplitN(page, "\n", 2)[1],
		"cut short":             strings.SplitAfter(page, "bad 4\n")[0],
		"no refusals by kind":   strings.SplitAfter(page, "refused 0\n")[0],
		"a number too large":    strings.Replace(page, "120", "18446744073709551616", 1),
		"a variable unfilled":   strings.Replace(page, "7", "{deniedconns}", 1),
		"empty":                 "",
	} {
		if got, ok := ParseStats([]byte(body)); ok {
			t.Errorf("ParseStats(%s) = %+v, true; want not ok", name, got)
		}
	}
}
