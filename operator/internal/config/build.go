package config

import (
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/identity"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// Build constructs every configured provider, decorated with its limits and
// with instrumentation, in config order, each with its Owner under
// cfg.InstallID, which must be set (configured, or derived by the caller).
// Constructors do not dial, so Build fails only on what Parse already
// checked.
func Build(cfg *Config, reg providers.Registry, tp trace.TracerProvider) (*providers.Set, error) {
	if err := identity.ValidateInstallID(cfg.InstallID); err != nil {
		return nil, err
	}
	var entries []*providers.Entry
	for _, p := range cfg.Providers {
		if err := ownerFits(cfg.InstallID, p.Name); err != nil {
			return nil, fmt.Errorf("provider %q: %w", p.Name, err)
		}
		prov, err := reg[p.Type].New(p.Block)
		if err != nil {
			return nil, fmt.Errorf("provider %q: %w", p.Name, err)
		}
		entries = append(entries, &providers.Entry{
			Name:              p.Name,
			Type:              p.Type,
			Owner:             identity.Owner(cfg.InstallID, p.Name),
			Provider:          providers.Instrument(p.Name, p.Type, providers.Limit(prov, p.Limits), tp),
			GC:                p.GC,
			CheckInterval:     p.CheckInterval,
			AllowedNamespaces: p.AllowedNamespaces,
		})
	}
	return providers.NewSet(entries...), nil
}
