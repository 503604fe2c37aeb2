//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// No Grafana runs in the lane (Debian does not package it); what a
// dashboard shows is the answers of its data source to its queries, so
// the lane's Prometheus answers the kit's dashboard's queries as Grafana
// would send them. What this catches that the unit test
// (TestDashboardReadsExportedMetrics) cannot: a label or a label value the
// scraped series do not carry, such as a namespace renamed by the scrape,
// which leaves a panel empty while every metric name is right.

// dashboardRateInterval stands for Grafana's $__rate_interval: at least
// four scrape intervals, and long enough to span the lane's traffic.
const dashboardRateInterval = "1m"

// grafanaDashboard is the part of Grafana's dashboard model the lane reads.
type grafanaDashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// labelValuesQuery is Grafana's label_values(metric, label) variable query.
var labelValuesQuery = regexp.MustCompile(`^label_values\((\w+),\s*(\w+)\)$`)

// operatorMetric finds the operator's metrics in a query.
var operatorMetric = regexp.MustCompile(`\b(egressproxies_[a-z_]+|leader_election_[a-z_]+)`)

// checkDashboard fails the lane on each of the dashboard's problems
// (dashboardProblems) and logs which panels showed data.
func (p *lanePrometheus) checkDashboard(t *testing.T, kit string, namespaces []string) {
	t.Helper()
	problems, shown, never := p.dashboardProblems(t.Context(), readDashboard(t, kit), namespaces)
	for _, problem := range problems {
		t.Error(problem)
	}
	t.Logf("dashboard: %d queries answered with series (%s); none, their metrics never written in this run: %v",
		len(shown), strings.Join(shown, ", "), never)
}

// dashboardProblems resolves the dashboard's namespace variable as
// Grafana does (the values of a label on a metric), requires it to offer
// every namespace given, selects those, and runs every panel's queries. A
// query is a problem when Prometheus refuses it, or when it answers
// nothing although a metric it reads has series (a label that does not
// match), unless it is a filter that is empty when all is well (`== 0`).
// It returns the problems, the panels that showed data, and those whose
// metrics were never written in the run (no panic, no GC deletion).
func (p *lanePrometheus) dashboardProblems(ctx context.Context, d grafanaDashboard, namespaces []string) (problems, shown, never []string) {
	now := time.Now()
	vars := map[string]string{"$__rate_interval": dashboardRateInterval}
	for _, v := range d.Templating.List {
		m := labelValuesQuery.FindStringSubmatch(v.Definition)
		if m == nil {
			continue
		}
		values, _, err := p.api.LabelValues(ctx, m[2], []string{m[1]}, now.Add(-time.Hour), now)
		if err != nil {
			problems = append(problems, fmt.Sprintf("dashboard variable %s (%s): %v", v.Name, v.Definition, err))
			continue
		}
		var quoted []string
		for _, ns := range namespaces {
			if !slices.Contains(values, model.LabelValue(ns)) {
				problems = append(problems, fmt.Sprintf("dashboard variable %s (%s) offers %v, not the Proxies' namespace %s", v.Name, v.Definition, values, ns))
			}
			quoted = append(quoted, regexp.QuoteMeta(ns))
		}
		// Several values selected: Grafana writes them as an alternation.
		vars["$"+v.Name] = "(" + strings.Join(quoted, "|") + ")"
	}
	for _, panel := range d.Panels {
		for _, target := range panel.Targets {
			expr := target.Expr
			for name, value := range vars {
				expr = strings.ReplaceAll(expr, name, value)
			}
			series, err := p.seriesOf(ctx, expr, now)
			if err != nil {
				problems = append(problems, fmt.Sprintf("dashboard panel %q: Prometheus refused %s: %v", panel.Title, expr, err))
				continue
			}
			if series > 0 {
				shown = append(shown, panel.Title)
				continue
			}
			var written []string
			metrics := operatorMetric.FindAllString(expr, -1)
			slices.Sort(metrics)
			for _, metric := range slices.Compact(metrics) {
				if n, err := p.seriesOf(ctx, "count("+metric+")", now); err == nil && n > 0 {
					written = append(written, metric)
				}
			}
			switch {
			case len(written) == 0:
				never = append(never, panel.Title)
			case !strings.HasSuffix(strings.TrimSpace(expr), "== 0"):
				problems = append(problems, fmt.Sprintf("dashboard panel %q shows nothing although %v has series: %s", panel.Title, written, expr))
			}
		}
	}
	return problems, shown, never
}

// seriesOf runs an instant query and counts the series of its answer.
func (p *lanePrometheus) seriesOf(ctx context.Context, expr string, at time.Time) (int, error) {
	v, _, err := p.api.Query(ctx, expr, at)
	if err != nil {
		return 0, err
	}
	switch v := v.(type) {
	case model.Vector:
		return len(v), nil
	case model.Matrix:
		return len(v), nil
	default:
		return 1, nil
	}
}

// readDashboard reads the dashboard from the kit's ConfigMap labelled for
// Grafana's dashboard sidecar.
func readDashboard(t *testing.T, path string) grafanaDashboard {
	t.Helper()
	for _, doc := range kitDocuments(t, path) {
		var cm corev1.ConfigMap
		if err := yaml.Unmarshal(doc, &cm); err != nil || cm.Kind != "ConfigMap" || cm.Labels["grafana_dashboard"] != "1" {
			continue
		}
		for key, value := range cm.Data {
			if !strings.HasSuffix(key, ".json") {
				continue
			}
			var d grafanaDashboard
			if err := json.Unmarshal([]byte(value), &d); err != nil {
				t.Fatalf("%s: the dashboard %s: %v", path, key, err)
			}
			return d
		}
	}
	t.Fatalf("%s holds no ConfigMap labelled grafana_dashboard: \"1\" with a .json dashboard", path)
	return grafanaDashboard{}
}
