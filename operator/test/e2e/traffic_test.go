//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metricstest"
)

// checkTraffic proves what a Proxy carried is seen (docs/egress.md,
// "Traffic" and "Access log"): the leader's metrics count the refusals
// checkEgress caused, as destinations refused (and no client refused:
// every client of this lane is allowed), and the connections it made,
// read from the VM by the probe; and the VM's journal holds the allowed request and the refused
// ones, with their URLs. Runs after checkEgress and checkMetrics (whose
// ServiceAccount it scrapes as).
func checkTraffic(t *testing.T, l lane, p *v1alpha1.Proxy) {
	t.Helper()
	token := strings.TrimSpace(kubectl(t, l, nil, "-n", installNamespace, "create", "token", "e2e-scraper"))
	ips := strings.Fields(kubectl(t, l, nil, "-n", installNamespace, "get", "endpointslices",
		"-l", "kubernetes.io/service-name="+metricsService, "-o", "jsonpath={.items[*].endpoints[*].addresses[0]}"))
	// Only the leader probes, so only it has the series: the sum over the
	// operator's Pods is the leader's.
	series := func() map[string]float64 {
		sums := map[string]float64{}
		for _, ip := range ips {
			a := metricstest.Scrape(t, "https://"+net.JoinHostPort(ip, "8443")+"/metrics", token)
			parser := expfmt.NewTextParser(model.UTF8Validation)
			families, err := parser.TextToMetricFamilies(strings.NewReader(a.Body))
			if err != nil {
				t.Fatalf("the metrics of %s do not parse: %v", ip, err)
			}
			for _, name := range []string{"egressproxies_proxy_connections_total", "egressproxies_proxy_refusals_total", "egressproxies_proxy_open_connections"} {
				for _, m := range families[name].GetMetric() {
					labels := map[string]string{}
					for _, lp := range m.GetLabel() {
						labels[lp.GetName()] = lp.GetValue()
					}
					if labels["namespace"] == p.Namespace && labels["proxy"] == p.Name {
						key := name
						if reason, ok := labels["reason"]; ok {
							key += "{" + reason + "}"
						}
						sums[key] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
					}
				}
			}
		}
		return sums
	}
	var got map[string]float64
	// A Ready Proxy is probed at each resync (a minute).
	within(t, 3*time.Minute, 5*time.Second, "the leader counts "+p.Name+"'s refusals and connections", func() (bool, string) {
		got = series()
		return got["egressproxies_proxy_refusals_total{destination}"] >= 2 && got["egressproxies_proxy_connections_total"] >= 1, fmt.Sprint(got)
	})
	if n, ok := got["egressproxies_proxy_refusals_total{client}"]; !ok || n != 0 {
		t.Errorf("client refusals of %s: %v (reported: %v); want 0, reported", p.Name, n, ok)
	}
	t.Logf("traffic of %s/%s in the leader's metrics: %v", p.Namespace, p.Name, got)

	journal, err := guestExec(t.Context(), l.URI, p.Status.Instance.Name,
		"ls /var/log/journal/*/system.journal >/dev/null && journalctl -q -o short-iso -t tinyproxy --no-pager")
	if err != nil {
		t.Fatalf("read the journal of %s: %v", p.Status.Instance.Name, err)
	}
	for _, want := range []string{"GET http://", "/egress-allowed", "refused on filtered url", "not-allowed.example/egress-host", "/egress-port"} {
		if !strings.Contains(journal, want) {
			t.Errorf("the journal of %s on its disk lacks %q; tinyproxy's lines:\n%s", p.Status.Instance.Name, want, journal)
		}
	}
	t.Logf("the journal of %s holds the allowed request and both refusals (%d lines of tinyproxy)", p.Status.Instance.Name, strings.Count(journal, "\n"))
}

// guestExec runs a shell command in the guest through its agent
// (guest-exec and guest-exec-status of qemu-guest-agent,
// https://www.qemu.org/docs/master/interop/qemu-ga-ref.html) with virsh,
// and returns its output.
func guestExec(ctx context.Context, uri, domain, script string) (string, error) {
	agent := func(cmd any) (json.RawMessage, error) {
		doc, _ := json.Marshal(cmd)
		out, err := exec.CommandContext(ctx, "virsh", "-c", uri, "qemu-agent-command", domain, string(doc)).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("virsh qemu-agent-command: %w: %s", err, out)
		}
		var r struct {
			Return json.RawMessage `json:"return"`
		}
		return r.Return, json.Unmarshal(out, &r)
	}
	ret, err := agent(map[string]any{"execute": "guest-exec", "arguments": map[string]any{
		"path": "/bin/sh", "arg": []string{"-c", script}, "capture-output": true}})
	if err != nil {
		return "", err
	}
	var started struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(ret, &started); err != nil {
		return "", err
	}
	for range 30 {
		ret, err := agent(map[string]any{"execute": "guest-exec-status", "arguments": map[string]any{"pid": started.PID}})
		if err != nil {
			return "", err
		}
		var status struct {
			Exited   bool   `json:"exited"`
			ExitCode int    `json:"exitcode"`
			Out      string `json:"out-data"`
			Err      string `json:"err-data"`
		}
		if err := json.Unmarshal(ret, &status); err != nil {
			return "", err
		}
		if status.Exited {
			out, _ := base64.StdEncoding.DecodeString(status.Out)
			errOut, _ := base64.StdEncoding.DecodeString(status.Err)
			if status.ExitCode != 0 {
				return "", fmt.Errorf("%q exited %d: %s%s", script, status.ExitCode, out, errOut)
			}
			return string(out), nil
		}
		time.Sleep(time.Second)
	}
	return "", fmt.Errorf("guest-exec of %q did not finish in 30 s", script)
}
