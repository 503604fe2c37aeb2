package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The provider SDKs an operator binary may hold, by the build tag that
// brings each in.
var sdkByTag = map[string]string{
	"memory":    "github.com/egress-proxies/egress-proxies-operator/contract/contracttest",
	"vsphere":   "github.com/vmware/govmomi",
	"proxmox":   "github.com/luthermonson/go-proxmox",
	"libvirt":   "libvirt.org/go/libvirt",
	"openstack": "github.com/gophercloud/gophercloud",
}

// build compiles the operator with tags and returns the binary's path and
// the module paths it holds (go version -m).
func build(t *testing.T, tags string) (string, []string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "operator")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-tags", tags, "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %q: %v\n%s", tags, err, out)
	}
	out, err := exec.CommandContext(t.Context(), "go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var mods []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && (f[0] == "dep" || f[0] == "=>") {
			mods = append(mods, f[1])
		}
	}
	return bin, mods
}

// Build tags choose the providers compiled in: a binary holds the SDK of
// every tag it was built with and of no other (docs/architecture.md, Principles).
func TestBuildTagsSelectProviders(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the operator twice")
	}
	for _, tags := range []string{"", "memory", "vsphere", "proxmox", "openstack", "libvirt"} {
		t.Run("tags="+tags, func(t *testing.T) {
			_, mods := build(t, tags)
			for tag, sdk := range sdkByTag {
				held := false
				for _, m := range mods {
					held = held || strings.HasPrefix(m, sdk)
				}
				if want := strings.Contains(" "+tags+" ", " "+tag+" "); held != want {
					t.Errorf("built with tags %q: holds %s = %v, want %v", tags, sdk, held, want)
				}
			}
		})
	}
}

// A providers config naming a type that is not compiled in stops the
// operator at start, naming the type and the tag to build with.
func TestTypeNotCompiledInFailsStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the operator")
	}
	bin, _ := build(t, "")
	cfg := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(cfg, []byte("providers:\n  - {name: dev, type: memory, memory: {regions: [r1]}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), bin, "--providers-config", cfg).CombinedOutput()
	if err == nil {
		t.Fatalf("the operator started with a type not compiled in:\n%s", out)
	}
	if !strings.Contains(string(out), `providers[0].type \"memory\": not compiled into this operator`) ||
		!strings.Contains(string(out), `build with -tags \"memory\"`) {
		t.Errorf("the start failure does not name the type and the tag:\n%s", out)
	}
	// Timestamps to the nanosecond: a failover is seconds long, and a log
	// to the second cannot say where they went (docs/addresses.md).
	var line struct{ TS string }
	if err := json.Unmarshal([]byte(strings.SplitN(string(out), "\n", 2)[0]), &line); err != nil {
		t.Fatalf("the log's first line is not JSON: %v\n%s", err, out)
	}
	if _, err := time.Parse(time.RFC3339Nano, line.TS); err != nil || !strings.Contains(line.TS, ".") {
		t.Errorf("the log's timestamp %q is not RFC 3339 with a fraction of a second (%v)", line.TS, err)
	}
}

// -version names the release the image build links in and the provider
// types compiled in: what a user reads off a binary in a shell-less image.
func TestVersionFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the operator")
	}
	bin := filepath.Join(t.TempDir(), "operator")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-tags", "vsphere proxmox", "-ldflags", "-X main.version=v9.8.7", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(t.Context(), bin, "-version").CombinedOutput()
	if err != nil {
		t.Fatalf("-version: %v\n%s", err, out)
	}
	if want := "egress-proxies-operator v9.8.7 (providers: proxmox vsphere)\n"; string(out) != want {
		t.Errorf("-version printed %q, want %q", out, want)
	}
}
