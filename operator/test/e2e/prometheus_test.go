//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// The lane's Prometheus is Debian's (the prometheus package), run inside
// the lane's namespace: it scrapes the operator's replicas as the
// monitoring kit's ServiceMonitor says (dist/monitoring.yaml) — the
// endpoints of the metrics Service, over HTTPS, with a ServiceAccount's
// token — and evaluates the kit's PrometheusRule, so the lane sees its
// alerts fire and clear (docs/operator.md, "Monitoring").
//
// Two departures from a cluster's Prometheus, both forced:
//   - Debian builds Prometheus without Kubernetes service discovery
//     (promtool: "field kubernetes_sd_configs not found"), so the lane
//     serves Prometheus's HTTP service discovery itself: at each refresh
//     the addresses of the selected Services' EndpointSlices on the
//     ServiceMonitor's port, what the endpointslice role finds;
//   - every rule's `for` is cut to laneFor, so that an alert fires within
//     the seconds a lane can wait; promtool unit-tests the shipped
//     durations (TestAlertRulesPassPromtool, make test).
const (
	laneFor     = 3 * time.Second
	scrapeEvery = time.Second
	// The alerts the lane plays: the leader killed, a Proxy's only VM
	// killed.
	alertNoLeader = "EgressProxiesNoLeader"
	alertNotReady = "EgressProxyNotReady"
)

// lanePrometheus is the running Prometheus's API.
type lanePrometheus struct {
	api promv1.API
}

// startPrometheus starts the lane's Prometheus and waits until it scrapes
// every endpoint of the metrics Service and has loaded every alert of the
// kit. It is stopped when the test ends; its log is prometheus.log in
// the lane's directory.
func startPrometheus(t *testing.T, l lane, cs kubernetes.Interface) *lanePrometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus: %v (hack/apt-ensure.sh @monitoring installs it)", err)
	}
	sm, rule := readMonitoringKit(t, l.Monitoring)
	dir := filepath.Join(l.State, "prometheus")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// Prometheus's own identity, as in a cluster: a ServiceAccount bound
	// to the metrics-reader ClusterRole. The kit's bearerTokenFile is the
	// path of that token inside Prometheus's Pod; here it is a file.
	tokenFile := filepath.Join(dir, "token")
	writeFile(t, tokenFile, []byte(metricsReaderToken(t, l, "e2e-prometheus")))

	discovery := newServiceMonitorDiscovery(cs, sm)
	sd := httptest.NewServer(discovery)
	t.Cleanup(sd.Close)

	var scrapes []map[string]any
	for i, ep := range sm.Spec.Endpoints {
		scrapes = append(scrapes, scrapeConfig(t, sm, i, ep, sd.URL, tokenFile))
	}
	alerts := 0
	for g := range rule.Spec.Groups {
		for r := range rule.Spec.Groups[g].Rules {
			rr := &rule.Spec.Groups[g].Rules[r]
			if rr.Alert != "" {
				alerts++
			}
			if rr.For != nil {
				d := monitoringv1.Duration(model.Duration(laneFor).String())
				rr.For = &d
			}
		}
	}
	rulesFile := filepath.Join(dir, "rules.yaml")
	writeYAML(t, rulesFile, map[string]any{"groups": rule.Spec.Groups})
	configFile := filepath.Join(dir, "prometheus.yml")
	every := model.Duration(scrapeEvery).String()
	writeYAML(t, configFile, map[string]any{
		"global":         map[string]any{"scrape_interval": every, "scrape_timeout": every, "evaluation_interval": every},
		"rule_files":     []string{rulesFile},
		"scrape_configs": scrapes,
	})

	addr := freeLoopbackAddr(t)
	logFile, err := os.Create(filepath.Join(l.State, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	// Not bound to the test's context: the Cleanup below stops it, after
	// the context is cancelled.
	cmd := exec.CommandContext(context.WithoutCancel(t.Context()), bin, "--config.file="+configFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logFile.Close()
	})
	c, err := promapi.NewClient(promapi.Config{Address: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	p := &lanePrometheus{api: promv1.NewAPI(c)}

	ctx := t.Context()
	within(t, 2*time.Minute, 500*time.Millisecond, "Prometheus scrapes every endpoint of the metrics Service", func() (bool, string) {
		want, err := discovery.addresses(ctx)
		if err != nil {
			return false, err.Error()
		}
		ts, err := p.api.Targets(ctx)
		if err != nil {
			return false, err.Error()
		}
		var up, other []string
		for _, at := range ts.Active {
			host := at.DiscoveredLabels[model.AddressLabel]
			if at.Health == promv1.HealthGood {
				up = append(up, host)
			} else {
				other = append(other, fmt.Sprintf("%s %s %s", host, at.Health, at.LastError))
			}
		}
		return len(want) > 0 && sameSet(up, want), fmt.Sprintf("endpoints %v; targets up %v, not %v", want, up, other)
	})
	within(t, time.Minute, 500*time.Millisecond, "Prometheus loads the kit's alerts", func() (bool, string) {
		rs, err := p.api.Rules(ctx, nil)
		if err != nil {
			return false, err.Error()
		}
		loaded := 0
		for _, g := range rs.Groups {
			for _, r := range g.Rules {
				if _, ok := r.(promv1.AlertingRule); ok {
					loaded++
				}
			}
		}
		return loaded == alerts, fmt.Sprintf("%d of %d alerts loaded", loaded, alerts)
	})
	return p
}

// readMonitoringKit decodes the kit's ServiceMonitor and PrometheusRule
// strictly, with prometheus-operator's own types.
func readMonitoringKit(t *testing.T, path string) (*monitoringv1.ServiceMonitor, *monitoringv1.PrometheusRule) {
	t.Helper()
	var sm *monitoringv1.ServiceMonitor
	var rule *monitoringv1.PrometheusRule
	for _, doc := range kitDocuments(t, path) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var into any
		switch meta.Kind {
		case monitoringv1.ServiceMonitorsKind:
			sm = &monitoringv1.ServiceMonitor{}
			into = sm
		case monitoringv1.PrometheusRuleKind:
			rule = &monitoringv1.PrometheusRule{}
			into = rule
		default:
			continue
		}
		if err := yaml.UnmarshalStrict(doc, into); err != nil {
			t.Fatalf("%s: the %s: %v", path, meta.Kind, err)
		}
	}
	if sm == nil || rule == nil {
		t.Fatalf("%s holds no ServiceMonitor or no PrometheusRule", path)
	}
	return sm, rule
}

// kitDocuments reads the YAML documents of the monitoring kit at path.
func kitDocuments(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, doc)
	}
}

// scrapeConfig is Prometheus's scrape config for the ServiceMonitor's
// endpoint i, as prometheus-operator writes it for the fields the kit uses
// (its job name, a port by name, scheme, path, honorLabels, bearer token,
// TLS verification); a field it does not translate fails the lane instead
// of being dropped. Targets come from the lane's HTTP discovery, with the
// target labels prometheus-operator gives them (namespace, service, pod,
// endpoint).
func scrapeConfig(t *testing.T, sm *monitoringv1.ServiceMonitor, i int, ep monitoringv1.Endpoint, sdURL, tokenFile string) map[string]any {
	t.Helper()
	if ep.Port == "" || ep.TargetPort != nil || len(ep.RelabelConfigs) > 0 || len(ep.MetricRelabelConfigs) > 0 || len(ep.Params) > 0 {
		t.Fatalf("the ServiceMonitor's endpoint %d uses a field the lane does not translate (a port by name only): %+v", i, ep)
	}
	// The kit names Prometheus's own token file, as kubebuilder's
	// scaffold does; the field's replacement, authorization, takes a
	// Secret, which would hold a long-lived token.
	if ep.BearerTokenFile == "" { //nolint:staticcheck // see above
		t.Fatalf("the ServiceMonitor's endpoint %d sends no token; the operator refuses an anonymous scrape", i)
	}
	scheme := "http"
	if ep.Scheme != nil {
		scheme = strings.ToLower(string(*ep.Scheme))
	}
	insecure := ep.TLSConfig != nil && ep.TLSConfig.InsecureSkipVerify != nil && *ep.TLSConfig.InsecureSkipVerify
	return map[string]any{
		"job_name":        fmt.Sprintf("serviceMonitor/%s/%s/%d", sm.Namespace, sm.Name, i),
		"scheme":          scheme,
		"metrics_path":    ep.Path,
		"honor_labels":    ep.HonorLabels,
		"authorization":   map[string]any{"credentials_file": tokenFile},
		"tls_config":      map[string]any{"insecure_skip_verify": insecure},
		"http_sd_configs": []map[string]any{{"url": sdURL + "?port=" + ep.Port, "refresh_interval": model.Duration(scrapeEvery).String()}},
	}
}

// serviceMonitorDiscovery serves Prometheus's HTTP service discovery for a
// ServiceMonitor: the addresses of the endpoints of the Services its
// selector picks in its namespaces, on the port named in the request,
// read from their EndpointSlices at every request.
type serviceMonitorDiscovery struct {
	cs kubernetes.Interface
	sm *monitoringv1.ServiceMonitor
}

func newServiceMonitorDiscovery(cs kubernetes.Interface, sm *monitoringv1.ServiceMonitor) *serviceMonitorDiscovery {
	return &serviceMonitorDiscovery{cs: cs, sm: sm}
}

// targetGroup is one entry of HTTP discovery's answer.
type targetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

func (d *serviceMonitorDiscovery) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	groups, err := d.groups(r.Context(), r.URL.Query().Get("port"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(groups)
}

// addresses lists the targets of every port of the ServiceMonitor.
func (d *serviceMonitorDiscovery) addresses(ctx context.Context) ([]string, error) {
	var out []string
	for _, ep := range d.sm.Spec.Endpoints {
		groups, err := d.groups(ctx, ep.Port)
		if err != nil {
			return nil, err
		}
		for _, g := range groups {
			out = append(out, g.Targets...)
		}
	}
	return out, nil
}

func (d *serviceMonitorDiscovery) groups(ctx context.Context, port string) ([]targetGroup, error) {
	sel, err := metav1.LabelSelectorAsSelector(&d.sm.Spec.Selector)
	if err != nil {
		return nil, err
	}
	namespaces := d.sm.Spec.NamespaceSelector.MatchNames
	if d.sm.Spec.NamespaceSelector.Any {
		return nil, errors.New("the lane's discovery does not list every namespace (namespaceSelector.any)")
	}
	if len(namespaces) == 0 {
		namespaces = []string{d.sm.Namespace}
	}
	groups := []targetGroup{}
	for _, ns := range namespaces {
		svcs, err := d.cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return nil, err
		}
		for _, svc := range svcs.Items {
			eps, err := d.cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
			if err != nil {
				return nil, err
			}
			for _, s := range eps.Items {
				for _, p := range s.Ports {
					if p.Name == nil || *p.Name != port || p.Port == nil {
						continue
					}
					for _, e := range s.Endpoints {
						labels := map[string]string{"namespace": ns, "service": svc.Name, "endpoint": port}
						if e.TargetRef != nil {
							labels["pod"] = e.TargetRef.Name
						}
						g := targetGroup{Labels: labels}
						for _, a := range e.Addresses {
							g.Targets = append(g.Targets, net.JoinHostPort(a, strconv.Itoa(int(*p.Port))))
						}
						groups = append(groups, g)
					}
				}
			}
		}
	}
	return groups, nil
}

// alertSelector is the PromQL selector of the alert's firing samples in
// Prometheus's ALERTS series, narrowed to the given labels.
func alertSelector(alert string, match map[string]string) string {
	m := []string{fmt.Sprintf("alertname=%q", alert), `alertstate="firing"`}
	for _, k := range slices.Sorted(maps.Keys(match)) {
		m = append(m, fmt.Sprintf("%s=%q", k, match[k]))
	}
	return "ALERTS{" + strings.Join(m, ",") + "}"
}

// firing reports whether the alert fires now.
func (p *lanePrometheus) firing(t *testing.T, alert string, match map[string]string) (bool, error) {
	v, _, err := p.api.Query(t.Context(), alertSelector(alert, match), time.Now())
	if err != nil {
		return false, err
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return false, fmt.Errorf("ALERTS answered a %s", v.Type())
	}
	return len(vec) > 0, nil
}

// waitQuiet waits until the alert does not fire: where the lane starts
// from before it plays it (the kit's rules see no scrape for the first
// second of Prometheus's life).
func (p *lanePrometheus) waitQuiet(t *testing.T, alert string, match map[string]string, limit time.Duration) {
	t.Helper()
	within(t, limit, 500*time.Millisecond, alert+" does not fire", func() (bool, string) {
		on, err := p.firing(t, alert, match)
		if err != nil {
			return false, err.Error()
		}
		return !on, "it fires"
	})
}

// fired is what Prometheus recorded of an alert: its first and last
// firing sample after the event, and when the lane saw it clear.
type fired struct {
	first, last, cleared time.Time
}

// firedAndCleared waits until the alert, which must have fired since
// from, fires no more, and returns when it fired, from Prometheus's own
// record (ALERTS over the range, at the evaluation interval).
func (p *lanePrometheus) firedAndCleared(t *testing.T, alert string, match map[string]string, from time.Time, limit time.Duration) fired {
	t.Helper()
	var f fired
	within(t, limit, 500*time.Millisecond, alert+" fires and clears", func() (bool, string) {
		on, err := p.firing(t, alert, match)
		if err != nil {
			return false, err.Error()
		}
		if on {
			return false, "it fires"
		}
		v, _, err := p.api.QueryRange(t.Context(), alertSelector(alert, match), promv1.Range{Start: from, End: time.Now(), Step: scrapeEvery})
		if err != nil {
			return false, err.Error()
		}
		m, ok := v.(model.Matrix)
		if !ok {
			return false, fmt.Sprintf("ALERTS over a range answered a %s", v.Type())
		}
		f = fired{cleared: time.Now()}
		for _, s := range m {
			for _, sample := range s.Values {
				at := sample.Timestamp.Time()
				if f.first.IsZero() || at.Before(f.first) {
					f.first = at
				}
				if at.After(f.last) {
					f.last = at
				}
			}
		}
		return !f.first.IsZero(), "it has not fired since " + from.UTC().Format(time.RFC3339Nano)
	})
	return f
}

// writeYAML writes v as YAML to path.
func writeYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, data)
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// freeLoopbackAddr is a loopback address with a port free now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
