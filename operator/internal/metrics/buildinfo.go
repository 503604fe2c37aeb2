package metrics

import (
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// NewBuildInfo returns egressproxies_build_info, 1 on every replica,
// labelled with what is running: the operator module's version and VCS
// revision as the Go toolchain recorded them in the binary ("(devel)" and
// "" for a build outside a release), the Go version, and the provider
// types compiled in (build tags). An alert or a dashboard joins on it to
// say which build a series came from.
func NewBuildInfo(providerTypes []string) prometheus.Collector {
	version, revision := "(devel)", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "egressproxies_build_info",
		Help: "1, labelled with the operator's version, VCS revision, Go version and compiled-in provider types.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": runtime.Version(),
			"providers": strings.Join(providerTypes, ",")},
	})
	g.Set(1)
	return g
}
