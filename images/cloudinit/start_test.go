package cloudinit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The runcmd that starts the proxy restarts it only when it does not run
// the configuration cloud-init wrote: a restart of a proxy that does cuts
// off the clients the operator already sends it. Run with sh against a
// systemctl that plays the service's state and records what it is asked.
func TestStartRestartsOnlyAProxyOnAnOlderConfig(t *testing.T) {
	out, err := Render(Proxy{Hostname: "web", Port: 3128, AllowedClients: []string{"10.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	doc := parse(t, out)
	// Before it, journald is restarted to read the journal's settings, and
	// the refusals counter, which reads the journal, is started.
	if len(doc.Runcmd) != 3 || strings.Join(doc.Runcmd[0], " ") != "systemctl restart systemd-journald" ||
		strings.Join(doc.Runcmd[1], " ") != "systemctl enable --now "+refusalsUnitName ||
		len(doc.Runcmd[2]) != 6 || doc.Runcmd[2][0] != "sh" || doc.Runcmd[2][1] != "-c" {
		t.Fatalf("runcmd %q: want journald restarted, the refusals counter started, then sh -c SCRIPT NAME SERVICE CONFIG", doc.Runcmd)
	}
	cmd := doc.Runcmd[2]
	written := time.Date(2026, 12, 1, 13, 1, 32, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		active  bool
		started string // ExecMainStartTimestamp as systemctl shows it
		show    bool   // whether systemctl show answers
		restart bool
	}{
		{"started after the config was written", true, "Tue 2026-12-01 13:01:33 UTC", true, false},
		{"started before the config was written", true, "Tue 2026-12-01 13:01:20 UTC", true, true},
		{"started in the second the config was written", true, "Tue 2026-12-01 13:01:32 UTC", true, true},
		{"not running", false, "", true, true},
		{"systemctl show fails", true, "", false, true},
		{"a start time date cannot read", true, "n/a", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			conf := filepath.Join(dir, "tinyproxy.conf")
			if err := os.WriteFile(conf, []byte("Port 3128\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(conf, written, written); err != nil {
				t.Fatal(err)
			}
			calls := filepath.Join(dir, "calls")
			active, show := "3", "1"
			if tc.active {
				active = "0"
			}
			if tc.show {
				show = "0"
			}
			// is-active exits 0 when active, 3 when not (systemctl(1)).
			fake := `#!/bin/sh
echo "$*" >> "` + calls + `"
case "$1" in
-q) [ "$2" = is-active ] && exit ` + active + ` ;;
show) [ ` + show + ` = 0 ] || exit 1; printf '%s\n' "` + tc.started + `" ;;
esac
exit 0
`
			if err := os.WriteFile(filepath.Join(dir, "systemctl"), []byte(fake), 0o755); err != nil {
				t.Fatal(err)
			}
			run := exec.CommandContext(t.Context(), cmd[0], cmd[1], cmd[2], cmd[3], cmd[4], conf)
			run.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "TZ=UTC")
			if out, err := run.CombinedOutput(); err != nil {
				t.Fatalf("the start script: %v\n%s", err, out)
			}
			got, _ := os.ReadFile(calls)
			restarted := strings.Contains(string(got), "restart tinyproxy")
			if !strings.Contains(string(got), "enable tinyproxy") || restarted != tc.restart {
				t.Errorf("systemctl was asked:\n%swant enable, and restart %t", got, tc.restart)
			}
		})
	}
}
