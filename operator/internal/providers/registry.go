// Package providers holds the operator's view of its configured providers:
// the constructors compiled in by build tags, the set of configured
// providers at run time, and the decorators every provider call goes
// through (limits, then spans, metrics and log keys).
package providers

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Constructor builds one provider from its config block. Block is the raw
// JSON of the `<type>:` block; the constructor decodes it strictly into the
// provider module's Config and validates it (contract §10). It must not dial
// (contract §7).
type Constructor struct {
	// Type is the `type:` value and the build tag.
	Type string
	// Validate decodes and validates a block without building anything, so
	// a config check can report every problem at once.
	Validate func(block json.RawMessage) error
	// New builds the provider.
	New func(block json.RawMessage) (contract.Provider, error)
}

// Registry maps a type to its constructor: the types compiled into this
// binary. cmd/providers_<type>.go files fill it, one per build tag.
type Registry map[string]Constructor

// Register adds c; like database/sql.Register it panics on a duplicate or an
// incomplete constructor, which is a build mistake, not a run-time one.
func (r Registry) Register(c Constructor) {
	if c.Type == "" || c.New == nil || c.Validate == nil {
		panic(fmt.Sprintf("providers: incomplete constructor for type %q", c.Type))
	}
	if _, dup := r[c.Type]; dup {
		panic(fmt.Sprintf("providers: type %q registered twice", c.Type))
	}
	r[c.Type] = c
}

// Types lists the compiled-in types, sorted.
func (r Registry) Types() []string {
	return slices.Sorted(maps.Keys(r))
}

// Typed builds a Constructor for a provider whose config block decodes into
// C: the block is decoded strictly (DecodeStrict: a key in the wrong case,
// unknown or given twice is an error naming it), then validated, then
// built.
func Typed[C any](typ string, validate func(C) error, build func(C) (contract.Provider, error)) Constructor {
	decode := func(block json.RawMessage) (C, error) {
		var c C
		if err := DecodeStrict(block, &c); err != nil {
			return c, err
		}
		return c, validate(c)
	}
	return Constructor{
		Type: typ,
		Validate: func(block json.RawMessage) error {
			_, err := decode(block)
			return err
		},
		New: func(block json.RawMessage) (contract.Provider, error) {
			c, err := decode(block)
			if err != nil {
				return nil, err
			}
			return build(c)
		},
	}
}
