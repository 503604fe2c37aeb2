package release

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metrics"
)

// The monitoring kit (operator/config/prometheus, dist/monitoring.yaml):
// prometheus-operator's own types read it strictly, its ServiceMonitor
// scrapes the install's metrics Service, its alerts name only metrics the
// operator exports and each has a runbook, and promtool checks and
// unit-tests the rules (testdata/alerts_test.yaml).

// renderMonitoring returns the kit's objects as make release-manifests
// writes them.
func renderMonitoring(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	return parse(t, run(t, nil, tool(t, "KUSTOMIZE"), "build", filepath.Join(repoRoot, "operator", "config", "prometheus")))
}

// strict decodes o into out, refusing a field out's type does not have: a
// misspelled field fails here, not silently in the cluster.
func strict(t *testing.T, o *unstructured.Unstructured, out any) {
	t.Helper()
	data, err := yaml.Marshal(o.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, out); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

// dashboardName is the ConfigMap of the kit's Grafana dashboard.
const dashboardName = "egress-proxies-dashboard"

// monitoringKit decodes the kit's one ServiceMonitor and one PrometheusRule.
func monitoringKit(t *testing.T, objs []*unstructured.Unstructured) (*monitoringv1.ServiceMonitor, *monitoringv1.PrometheusRule) {
	t.Helper()
	var sm *monitoringv1.ServiceMonitor
	var rule *monitoringv1.PrometheusRule
	for _, o := range objs {
		switch o.GetKind() {
		case monitoringv1.ServiceMonitorsKind:
			sm = &monitoringv1.ServiceMonitor{}
			strict(t, o, sm)
		case monitoringv1.PrometheusRuleKind:
			rule = &monitoringv1.PrometheusRule{}
			strict(t, o, rule)
		case "ConfigMap":
			if o.GetName() != dashboardName {
				t.Errorf("the monitoring kit holds ConfigMap %s", o.GetName())
			}
		default:
			t.Errorf("the monitoring kit holds a %s %s", o.GetKind(), o.GetName())
		}
	}
	if sm == nil || rule == nil {
		t.Fatalf("the monitoring kit lacks its ServiceMonitor or its PrometheusRule")
	}
	return sm, rule
}

// The ServiceMonitor selects the install's metrics Service, in its
// namespace, by a port the Service has, over HTTPS with a bearer token
// (the endpoint refuses anything else).
func TestServiceMonitorScrapesTheMetricsService(t *testing.T) {
	sm, _ := monitoringKit(t, renderMonitoring(t))
	objs := render(t)
	svc := &corev1.Service{}
	named(t, objs, "Service", "egress-proxies-controller-manager-metrics-service", svc)
	if sm.Namespace != svc.Namespace {
		t.Errorf("the ServiceMonitor is in %q, the metrics Service in %q", sm.Namespace, svc.Namespace)
	}
	if !selects(t, &sm.Spec.Selector, svc.Labels) {
		t.Errorf("the ServiceMonitor's selector %v does not select the metrics Service (labels %v)", sm.Spec.Selector, svc.Labels)
	}
	for _, o := range objs {
		if o.GetKind() == "Service" && o.GetName() != svc.Name && selects(t, &sm.Spec.Selector, o.GetLabels()) {
			var other corev1.Service
			named(t, objs, "Service", o.GetName(), &other)
			for _, e := range sm.Spec.Endpoints {
				if slices.ContainsFunc(other.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == e.Port }) {
					t.Errorf("the ServiceMonitor would scrape Service %s too, by its port %q", other.Name, e.Port)
				}
			}
		}
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("the ServiceMonitor has %d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	e := sm.Spec.Endpoints[0]
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == e.Port }) {
		t.Errorf("the ServiceMonitor scrapes port %q; the metrics Service has %v", e.Port, svc.Spec.Ports)
	}
	if e.Scheme == nil || !strings.EqualFold(string(*e.Scheme), "https") || e.BearerTokenFile == "" { //nolint:staticcheck // the token Prometheus runs with; the documented way for in-cluster scrapes
		t.Errorf("the ServiceMonitor's endpoint: scheme %v, bearer token file %q; want https with its ServiceAccount's token", e.Scheme, e.BearerTokenFile) //nolint:staticcheck // as above
	}
}

// prometheus-operator gives every target of a ServiceMonitor these labels
// (its generated relabelings: the target's namespace, Service, Pod,
// container and endpoint, and Prometheus's job and instance). A scraped
// label of the same name is renamed exported_<name> unless the endpoint
// honours the scraped labels.
var targetLabels = []string{"namespace", "service", "pod", "container", "endpoint", "job", "instance"}

// The operator's metrics label a Proxy's namespace `namespace`; scraped
// without honorLabels, Prometheus would rename it exported_namespace and
// give `namespace` the operator's own, so every alert and dashboard panel
// would name the operator's namespace. Found by the e2e lane's
// Prometheus: EgressProxyNotReady{namespace="e2e-bound"} never matched.
func TestServiceMonitorKeepsTheOperatorsLabels(t *testing.T) {
	sm, _ := monitoringKit(t, renderMonitoring(t))
	clashing := map[string][]string{}
	for name, labels := range exportedLabels() {
		for _, l := range labels {
			if slices.Contains(targetLabels, l) {
				clashing[l] = append(clashing[l], name)
			}
		}
	}
	if len(clashing) == 0 {
		t.Fatal("no exported metric has a label a ServiceMonitor's target has; the test reads the wrong labels")
	}
	for i, e := range sm.Spec.Endpoints {
		if !e.HonorLabels {
			t.Errorf("the ServiceMonitor's endpoint %d does not set honorLabels; these metrics' labels would be renamed exported_<label>: %v", i, clashing)
		}
	}
}

// exportedLabels maps each of the operator's own metrics to its variable
// labels.
func exportedLabels() map[string][]string {
	out := map[string][]string{}
	desc := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	collectors := append(metrics.Collectors(), metrics.NewBuildInfo(nil), metrics.NewProxyPhases(nil, nil), metrics.NewPoolAddresses(nil, nil))
	for _, c := range collectors {
		ch := make(chan *prometheus.Desc, 10)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			if m := desc.FindStringSubmatch(d.String()); m != nil && m[2] != "" {
				out[m[1]] = strings.Split(m[2], ",")
			}
		}
	}
	return out
}

// exported lists the names of the metrics the operator serves: its own and
// the ones of controller-runtime its alerts read.
func exported() map[string]bool {
	names := map[string]bool{
		// controller-runtime's pkg/metrics/leaderelection.go: 1 on the
		// replica that leads.
		"leader_election_master_status": true,
	}
	collectors := append(metrics.Collectors(), metrics.NewBuildInfo(nil), metrics.NewProxyPhases(nil, nil), metrics.NewPoolAddresses(nil, nil))
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range collectors {
		ch := make(chan *prometheus.Desc, 10)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			name := fqName.FindStringSubmatch(d.String())[1]
			names[name] = true
			if _, isHistogram := c.(prometheus.ObserverVec); isHistogram {
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					names[name+suffix] = true
				}
			}
		}
	}
	return names
}

// Every alert reads only metrics the operator exports (a renamed metric
// would leave its alert silent for good), is labelled with a severity, and
// links a runbook that docs/operator.md has.
func TestAlertsReadExportedMetricsAndHaveRunbooks(t *testing.T) {
	_, rule := monitoringKit(t, renderMonitoring(t))
	names := exported()
	docs, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operator.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for line := range strings.SplitSeq(string(docs), "\n") {
		if heading, ok := strings.CutPrefix(line, "#### "); ok {
			anchors[strings.ToLower(strings.TrimSpace(heading))] = true
		}
	}
	metricName := regexp.MustCompile(`\b(egressproxies_[a-z_]+|leader_election_[a-z_]+)`)
	alerts := 0
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			for _, m := range metricName.FindAllString(r.Expr.String(), -1) {
				if !names[m] {
					t.Errorf("alert %s reads %s, which the operator does not export", r.Alert, m)
				}
			}
			if r.Labels["severity"] == "" {
				t.Errorf("alert %s has no severity label", r.Alert)
			}
			url := r.Annotations["runbook_url"]
			anchor, ok := strings.CutPrefix(url, "https://github.com/egress-proxies/egress-proxies-operator/blob/main/docs/operator.md#")
			if !ok || anchor != strings.ToLower(r.Alert) || !anchors[anchor] {
				t.Errorf("alert %s: runbook_url %q; want docs/operator.md#%s, a \"#### %s\" heading there", r.Alert, url, strings.ToLower(r.Alert), r.Alert)
			}
		}
	}
	if alerts == 0 {
		t.Fatal("the PrometheusRule has no alert")
	}
}

// promtool (Debian's prometheus package) checks the rules and runs their
// unit tests. make test/operator installs it and sets
// MONITORING_TEST_PROMTOOL=1, which makes a missing promtool fail the
// test instead of skipping it.
func TestAlertRulesPassPromtool(t *testing.T) {
	promtool := promtoolPath(t)
	_, rule := monitoringKit(t, renderMonitoring(t))
	groups, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join("testdata", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"alerts.yaml": groups, "alerts_test.yaml": tests} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run(t, nil, promtool, "check", "rules", filepath.Join(dir, "alerts.yaml"))
	run(t, nil, promtool, "test", "rules", filepath.Join(dir, "alerts_test.yaml"))
}

// promtoolPath finds promtool, or skips the test; with
// MONITORING_TEST_PROMTOOL=1 (make test/operator) a missing one fails it.
func promtoolPath(t *testing.T) string {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("MONITORING_TEST_PROMTOOL") == "1" {
			t.Fatalf("promtool: %v (hack/apt-ensure.sh @monitoring installs it)", err)
		}
		t.Skip("promtool is not installed: hack/apt-ensure.sh @monitoring; make test/operator requires it")
	}
	return promtool
}

// grafanaDashboard is the dashboard the kit's ConfigMap holds: its
// panels' queries, and the data source each names.
type grafanaDashboard struct {
	Panels []struct {
		Title      string `json:"title"`
		Type       string `json:"type"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// The Grafana dashboard reads only metrics the operator exports (a renamed
// metric would leave its panel empty for good), every query is PromQL that
// promtool accepts (each checked as a recording rule, Grafana's
// $__rate_interval read as 5m), and every panel queries the dashboard's
// data source variable.
func TestDashboardReadsExportedMetrics(t *testing.T) {
	var cm corev1.ConfigMap
	named(t, renderMonitoring(t), "ConfigMap", dashboardName, &cm)
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard's ConfigMap is labelled %v; Grafana's sidecar looks for grafana_dashboard: \"1\"", cm.Labels)
	}
	var d grafanaDashboard
	if err := json.Unmarshal([]byte(cm.Data["egress-proxies.json"]), &d); err != nil {
		t.Fatalf("the dashboard: %v", err)
	}
	names := exported()
	metricName := regexp.MustCompile(`\b(egressproxies_[a-z_]+|leader_election_[a-z_]+)`)
	var rules []map[string]string
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: data source %v, %d queries; want ${datasource} and a query", p.Title, p.Datasource, len(p.Targets))
		}
		for _, target := range p.Targets {
			found := metricName.FindAllString(target.Expr, -1)
			if len(found) == 0 {
				t.Errorf("panel %q reads no metric of the operator's: %s", p.Title, target.Expr)
			}
			for _, m := range found {
				if !names[m] {
					t.Errorf("panel %q reads %s, which the operator does not export", p.Title, m)
				}
			}
			rules = append(rules, map[string]string{"record": fmt.Sprintf("panel:%d", len(rules)), "expr": strings.ReplaceAll(target.Expr, "$__rate_interval", "5m")})
		}
	}
	if len(rules) == 0 {
		t.Fatal("the dashboard has no query")
	}
	data, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, nil, promtoolPath(t), "check", "rules", file)
}

// With monitoring.serviceMonitor, monitoring.prometheusRule and
// monitoring.dashboard enabled, the chart renders the kit's objects field
// for field (its alert rules and dashboard are copies, files/alerts.yaml
// and files/dashboard.json, that Helm does not template); with the
// defaults it renders neither (TestChartRendersTheReleaseManifests).
func TestChartRendersTheMonitoringKit(t *testing.T) {
	want := map[string]map[string]any{}
	namespace := ""
	for _, o := range renderMonitoring(t) {
		namespace = o.GetNamespace()
		want[key(o)] = withoutHelmOnly(o)
	}
	got := map[string]map[string]any{}
	for _, o := range helmTemplate(t, namespace, "--set", "monitoring.serviceMonitor.enabled=true", "--set", "monitoring.prometheusRule.enabled=true", "--set", "monitoring.dashboard.enabled=true") {
		if o.GetKind() == monitoringv1.ServiceMonitorsKind || o.GetKind() == monitoringv1.PrometheusRuleKind || (o.GetKind() == "ConfigMap" && o.GetName() == dashboardName) {
			got[key(o)] = withoutHelmOnly(o)
		}
	}
	sameObjects(t, "the monitoring kit's manifests", want, got)
}
