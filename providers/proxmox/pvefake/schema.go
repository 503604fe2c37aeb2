package pvefake

import (
	"embed"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/egress-proxies/egress-proxies-operator/providers/proxmox/pvefake/internal/facts"
)

//go:generate go run ./internal/schemagen -dir schema

// The facts generated from PVE's published API schema (schema/README.md).
//
//go:embed schema/facts-pve8.json schema/facts-pve9.json
var factsFS embed.FS

// apiSchema is one version's facts, indexed for routing.
type apiSchema struct {
	facts.Facts
	endpoints []*endpoint
}

// endpoint is one method of one path template, split into segments.
type endpoint struct {
	*facts.Endpoint
	segs []string
}

var schemas = map[int]*apiSchema{}

func init() {
	for _, major := range []int{8, 9} {
		b, err := factsFS.ReadFile(fmt.Sprintf("schema/facts-pve%d.json", major))
		if err != nil {
			panic(err)
		}
		s := &apiSchema{}
		if err := json.Unmarshal(b, &s.Facts); err != nil {
			panic(fmt.Sprintf("facts-pve%d.json: %v", major, err))
		}
		for _, ep := range s.Endpoints {
			s.endpoints = append(s.endpoints, &endpoint{Endpoint: ep, segs: strings.Split(strings.TrimPrefix(ep.Path, "/"), "/")})
		}
		schemas[major] = s
	}
}

// find returns the endpoint serving method and path (segments after
// /api2/json), with the path's template parameters bound, or nil.
func (s *apiSchema) find(method string, path []string) (*endpoint, map[string]string) {
	for _, ep := range s.endpoints {
		if ep.Method != method || len(ep.segs) != len(path) {
			continue
		}
		vars := map[string]string{}
		ok := true
		for i, seg := range ep.segs {
			if strings.HasPrefix(seg, "{") {
				vars[strings.Trim(seg, "{}")] = path[i]
			} else if seg != path[i] {
				ok = false
				break
			}
		}
		if ok {
			return ep, vars
		}
	}
	return nil, nil
}

// validate checks params (query, body and the path's template
// parameters, merged as PVE's RESTHandler merges them) against the
// endpoint's schema with pve-common's semantics (src/PVE/JSONSchema.pm
// check_object, check_prop, check_type, check_format): every error is
// collected per parameter, and any error is PVE's 400 "Parameter
// verification failed." with the "errors" object
// (PVE::JSONSchema::validate → raise(..., errors => ...)).
func (ep *endpoint) validate(params map[string]string) *apiError {
	errs := map[string]string{}
	for name, p := range ep.Parameters {
		if p.Indexed {
			continue
		}
		v, ok := params[name]
		checkProp(errs, name, p, v, ok)
	}
	for name, v := range params {
		if _, ok := ep.Parameters[name]; ok {
			continue
		}
		if p := indexed(ep.Parameters, name); p != nil {
			checkProp(errs, name, p, v, true)
			continue
		}
		if ep.AdditionalProperties != nil && !*ep.AdditionalProperties {
			addError(errs, name, "property is not defined in schema and the schema does not allow additional properties")
		}
	}
	for name := range params {
		if p := ep.Parameters[name]; p != nil && p.Requires != "" {
			if _, ok := params[p.Requires]; !ok {
				addError(errs, p.Requires, fmt.Sprintf("missing property required by '%s'", name))
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return &apiError{status: 400, msg: "Parameter verification failed.", params: errs}
}

var indexedRE = regexp.MustCompile(`^(.*?)(\d+)$`)

// indexed finds the schema of a key the API viewer lists as "name[n]":
// ide2 is "ide[n]", within the n its description gives.
func indexed(props map[string]*facts.Param, key string) *facts.Param {
	m := indexedRE.FindStringSubmatch(key)
	if m == nil {
		return nil
	}
	p := props[m[1]+"[n]"]
	if p == nil {
		return nil
	}
	n, err := strconv.Atoi(m[2])
	if err != nil || (m[2] != "0" && strings.HasPrefix(m[2], "0")) || (p.MaxIndex != nil && n > *p.MaxIndex) {
		return nil
	}
	return p
}

// addError is JSONSchema.pm add_error: a second error on one path is
// joined to the first with a literal '\n'.
func addError(errs map[string]string, path, msg string) {
	if path == "" {
		path = "_root"
	}
	if old, ok := errs[path]; ok {
		errs[path] = old + `\n` + msg
		return
	}
	errs[path] = msg
}

var (
	integerRE = regexp.MustCompile(`^[+-]?\d+$`)
	numberRE  = regexp.MustCompile(`^[+-]?(\d+\.\d+|\d+\.|\.\d+|\d+)([eE][+-]?\d+)?$`)
)

// checkProp is JSONSchema.pm check_prop for a scalar value, in its
// order: missing, type, format, pattern, maxLength, minLength, maximum,
// minimum, enum; the first failing check ends it (but the enum).
func checkProp(errs map[string]string, path string, p *facts.Param, v string, present bool) {
	if p.Alias != "" {
		return // aliases are remapped, not checked (check_prop)
	}
	if !present {
		if !p.Optional {
			addError(errs, path, "property is missing and it is not optional")
		}
		return
	}
	switch p.Type {
	case "boolean":
		if v != "0" && v != "1" {
			addError(errs, path, fmt.Sprintf("type check ('boolean') failed - got '%s'", v))
			return
		}
	case "integer":
		if !integerRE.MatchString(v) {
			addError(errs, path, fmt.Sprintf("type check ('integer') failed - got '%s'", v))
			return
		}
	case "number":
		if !numberRE.MatchString(v) {
			addError(errs, path, fmt.Sprintf("type check ('number') failed - got '%s'", v))
			return
		}
	}
	props := p.Properties
	if props == nil {
		props = hashFormats[p.Format]
	}
	if props != nil {
		if err := parsePropertyString(path, props, v); err != "" {
			addError(errs, path, "invalid format - "+err)
			return
		}
	} else if p.Format != "" {
		if err := checkFormat(p.Format, v); err != "" {
			addError(errs, path, "invalid format - "+err)
			return
		}
	}
	if p.Pattern != "" {
		if re, err := perlRegexp(p.Pattern); err == nil && !re.MatchString(v) {
			addError(errs, path, "value does not match the regex pattern")
			return
		}
	}
	if p.MaxLength != nil && len(v) > *p.MaxLength {
		addError(errs, path, fmt.Sprintf("value may only be %d characters long", *p.MaxLength))
		return
	}
	if p.MinLength != nil && len(v) < *p.MinLength {
		addError(errs, path, fmt.Sprintf("value must be at least %d characters long", *p.MinLength))
		return
	}
	if numberRE.MatchString(v) {
		f, _ := strconv.ParseFloat(v, 64)
		if p.Maximum != nil && f > *p.Maximum {
			addError(errs, path, "value must have a maximum value of "+perlNum(*p.Maximum))
			return
		}
		if p.Minimum != nil && f < *p.Minimum {
			addError(errs, path, "value must have a minimum value of "+perlNum(*p.Minimum))
			return
		}
	}
	if len(p.Enum) > 0 && !contains(p.Enum, v) {
		addError(errs, path, fmt.Sprintf("value '%s' does not have a value in the enumeration '%s'", v, strings.Join(p.Enum, ", ")))
	}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func perlNum(f float64) string {
	if f == math.Trunc(f) {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// perlRegexp compiles a schema pattern as JSONSchema.pm applies it,
// m/^$pattern$/. Patterns the schema stored from a Perl qr// carry its
// "(?^:…)" or "(?^i:…)" wrapper, which Go spells "(?:…)" and "(?i:…)".
func perlRegexp(pattern string) (*regexp.Regexp, error) {
	pattern = strings.ReplaceAll(pattern, "(?^:", "(?:")
	pattern = strings.ReplaceAll(pattern, "(?^i:", "(?i:")
	return regexp.Compile("^(?:" + pattern + ")$")
}

// parsePropertyString is JSONSchema.pm parse_property_string: comma-
// separated key=value parts (a bare value is the default key's), aliases
// remapped, then check_object on the keys with additional properties
// refused. It returns the error text check_prop puts after "invalid
// format - ", "" when the string is valid.
func parsePropertyString(path string, props map[string]*facts.Param, data string) string {
	res := map[string]string{}
	defaultKey := ""
	for _, part := range strings.Split(data, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, hasEq := strings.Cut(part, "=")
		switch {
		case hasEq && k != "" && v != "":
			if _, dup := res[k]; dup {
				return "duplicate key in comma-separated list property: " + k + "\n"
			}
			schema := props[k]
			if schema != nil && schema.Alias != "" {
				if schema.KeyAlias != "" {
					if _, dup := res[schema.KeyAlias]; dup {
						return "key alias '" + schema.KeyAlias + "' is already defined\n"
					}
					res[schema.KeyAlias] = k
				}
				k = schema.Alias
				schema = props[k]
				if _, dup := res[k]; dup {
					return "key '" + k + "' is already defined (via alias)\n"
				}
			}
			if schema == nil {
				return "invalid key in comma-separated list property: " + k + "\n"
			}
			if schema.Type == "boolean" {
				v = parseBoolean(v)
			}
			res[k] = v
		case !hasEq:
			if defaultKey != "" {
				return "duplicate key in comma-separated list property: " + defaultKey + "\n"
			}
			for _, key := range sortedKeys(props) {
				if props[key].DefaultKey {
					defaultKey = key
					if _, set := res[key]; set {
						return "duplicate key in comma-separated list property: " + key + "\n"
					}
					if props[key].Type == "boolean" {
						part = parseBoolean(part)
					}
					res[key] = part
					break
				}
			}
			if defaultKey == "" {
				return "value without key, but schema does not define a default key\n"
			}
		default:
			return "missing key in comma-separated list property\n"
		}
	}
	errs := map[string]string{}
	for k, p := range props {
		v, ok := res[k]
		checkProp(errs, path+"."+k, p, v, ok)
	}
	for k := range res {
		if props[k] == nil {
			addError(errs, path+"."+k, "property is not defined in schema and the schema does not allow additional properties")
		} else if r := props[k].Requires; r != "" {
			// check_object: a key's "requires" names a key that must be set too.
			if _, ok := res[r]; !ok {
				addError(errs, path+"."+r, "missing property required by '"+path+"."+k+"'")
			}
		}
	}
	if len(errs) == 0 {
		return ""
	}
	// raise "format error\n", errors => …; check_prop prints the
	// exception, which lists each error after the message.
	msg := "format error\n"
	for _, k := range sortedKeys(errs) {
		msg += k + ": " + errs[k] + "\n"
	}
	return msg
}

// parseBoolean is JSONSchema.pm parse_boolean.
func parseBoolean(v string) string {
	switch strings.ToLower(v) {
	case "1", "on", "yes", "true":
		return "1"
	case "0", "off", "no", "false":
		return "0"
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
