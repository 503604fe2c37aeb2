// Package facts holds the shapes of the facts schemagen writes from
// Proxmox VE's published API schema and pvefake reads (schema/facts-pve*.json).
package facts

import "encoding/json"

// Facts is one version's output.
type Facts struct {
	Version   string      `json:"version"`
	Commit    string      `json:"commit"`
	SHA256    string      `json:"sha256"`
	Endpoints []*Endpoint `json:"endpoints"`
	// Formats are the named formats the kept parameters use (a "-list"
	// or "-opt" suffix stripped), for the fake to say which it checks.
	Formats []string `json:"formats"`
}

// Endpoint is one method of one path.
type Endpoint struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	// AdditionalProperties false: unknown parameters are refused.
	AdditionalProperties *bool             `json:"additionalProperties,omitempty"`
	Parameters           map[string]*Param `json:"parameters"`
	Permissions          *Permissions      `json:"permissions,omitempty"`
}

// Permissions is the method's permissions object.
type Permissions struct {
	Check       json.RawMessage `json:"check,omitempty"`
	User        string          `json:"user,omitempty"`
	Description string          `json:"description,omitempty"`
}

// Param is one parameter (or one key of a property string).
type Param struct {
	Type       string            `json:"type,omitempty"`
	Format     string            `json:"format,omitempty"`
	Properties map[string]*Param `json:"properties,omitempty"` // a property string's keys (format given as a hash)
	Enum       []string          `json:"enum,omitempty"`
	Minimum    *float64          `json:"minimum,omitempty"`
	Maximum    *float64          `json:"maximum,omitempty"`
	Pattern    string            `json:"pattern,omitempty"`
	MaxLength  *int              `json:"maxLength,omitempty"`
	MinLength  *int              `json:"minLength,omitempty"`
	Optional   bool              `json:"optional,omitempty"`
	Default    any               `json:"default,omitempty"`
	Requires   string            `json:"requires,omitempty"`
	Alias      string            `json:"alias,omitempty"`
	KeyAlias   string            `json:"keyAlias,omitempty"`
	DefaultKey bool              `json:"defaultKey,omitempty"`
	// Indexed: the schema names the key "name[n]" (ide0 … ide3 are
	// "ide[n]"); MaxIndex is the
	// highest n its description gives ("n is 0 to 3"), absent when it
	// gives none.
	Indexed  bool `json:"indexed,omitempty"`
	MaxIndex *int `json:"maxIndex,omitempty"`
}
