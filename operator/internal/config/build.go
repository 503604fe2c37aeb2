package config

import (
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// Build constructs every configured provider, decorated with its limits and
// with instrumentation, in config order. Constructors do not dial, so Build
// fails only on what Parse already checked.
func Build(cfg *Config, reg providers.Registry, tp trace.TracerProvider) (*providers.Set, error) {
	var entries []*providers.Entry
	for _, p := range cfg.Providers {
		prov, err := reg[p.Type].New(p.Block)
		if err != nil {
			return nil, fmt.Errorf("provider %q: %w", p.Name, err)
		}
		entries = append(entries, &providers.Entry{
			Name:          p.Name,
			Type:          p.Type,
			Provider:      providers.Instrument(p.Name, p.Type, providers.Limit(prov, p.Limits), tp),
			GC:            p.GC,
			CheckInterval: p.CheckInterval,
		})
	}
	return providers.NewSet(entries...), nil
}
