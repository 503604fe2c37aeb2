package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/config"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metricstest"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// defaultProviders are the types of the default build: the Makefile's
// PROVIDERS, which make operator and make image-operator compile in.
func defaultProviders(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^PROVIDERS \?= (.+)$`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("the Makefile sets no default PROVIDERS")
	}
	return strings.Fields(string(m[1]))
}

// shippedConfig is providers.yaml of the shipped providers-config ConfigMap.
func shippedConfig(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../config/manager/providers_config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(raw, &cm); err != nil {
		t.Fatal(err)
	}
	return cm.Data["providers.yaml"]
}

// The shipped providers config names no type the default build lacks.
func TestShippedConfigFitsTheDefaultBuild(t *testing.T) {
	all, reg := validating(), providers.Registry{}
	for _, typ := range defaultProviders(t) {
		reg.Register(all[typ])
	}
	if _, err := config.Parse([]byte(shippedConfig(t)), reg); err != nil {
		t.Errorf("the shipped providers config, with the default build's types %v: %v", reg.Types(), err)
	}
}

// The default build, given the shipped providers config, starts against a
// real API server, says that no provider is configured, and is ready; its
// metrics endpoint is served over TLS and refuses an anonymous scrape.
func TestDefaultBuildStartsWithTheShippedConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the operator")
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run through `make test/operator`, or export KUBEBUILDER_ASSETS=$(hack/control-plane.sh)")
	}
	bin, _ := build(t, strings.Join(defaultProviders(t), " "))
	env := &envtest.Environment{CRDDirectoryPaths: []string{"../config/crd/bases"}, ErrorIfCRDPathMissing: true}
	if _, err := env.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	admin, err := env.AddUser(envtest.User{Name: "operator", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{"kubeconfig": string(kubeconfig), "providers.yaml": shippedConfig(t)}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	probeAddr, metricsAddr := metricstest.FreeAddr(t), metricstest.FreeAddr(t)
	cmd := exec.CommandContext(context.WithoutCancel(t.Context()), bin,
		"--kubeconfig", filepath.Join(dir, "kubeconfig"),
		"--providers-config", filepath.Join(dir, "providers.yaml"),
		"--credentials-dir", t.TempDir(),
		"--health-probe-bind-address", probeAddr,
		"--metrics-bind-address", metricsAddr)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited: // reported where it was seen
			return
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		if waitErr != nil {
			t.Errorf("the operator exited with %v on SIGTERM:\n%s", waitErr, out.String())
		}
	})

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		// The metrics certificate is self-signed.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a loopback test of a self-signed server
	}}
	// until polls url until it answers want (the endpoints start beside
	// each other, in no set order), for at most a minute, and returns the
	// last answer.
	until := func(url string, want int) (int, error) {
		deadline := time.Now().Add(time.Minute)
		for {
			select {
			case <-exited:
				t.Fatalf("the operator exited (%v):\n%s", waitErr, out.String())
			default:
			}
			code, err := status(t, client, url)
			if code == want || time.Now().After(deadline) {
				return code, err
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// The start log before the endpoints: a port FreeAddr found free can be
	// taken by another process before the operator binds it (another
	// package's envtest etcd answers /readyz with 200 on its own ports), and
	// such an answer must not pass for the operator's. CI saw it once: /readyz
	// answered 200 while the operator had not written a line yet.
	want := "the providers config names no provider"
	for deadline := time.Now().Add(time.Minute); !strings.Contains(out.String(), want); time.Sleep(200 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("the operator exited (%v):\n%s", waitErr, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the start log does not say %q within a minute:\n%s", want, out.String())
		}
	}
	if code, err := until("http://"+probeAddr+"/readyz", http.StatusOK); code != http.StatusOK {
		t.Fatalf("/readyz answered %d (%v), want %d:\n%s", code, err, http.StatusOK, out.String())
	}
	if code, err := until("https://"+metricsAddr+"/metrics", http.StatusUnauthorized); code != http.StatusUnauthorized {
		t.Errorf("an anonymous scrape of https://%s/metrics answered %d (%v), want %d", metricsAddr, code, err, http.StatusUnauthorized)
	}
}

// status GETs url and returns the status code, or 0 and why nothing
// answered.
func status(t *testing.T, c *http.Client, url string) (int, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// lockedBuffer collects a process's output, written and read from
// different goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
