// Command schemagen turns the pinned Proxmox VE API schema (pve-docs
// api-viewer/apidata.js, gzipped under pvefake/schema, one per version
// listed in schema/SOURCE) into the facts pvefake validates requests and
// checks permissions with: for each endpoint the fake serves, its path
// template and method, its parameters (type, format, enum, minimum,
// maximum, pattern, maxLength, optional, default; a property string's
// keys), additionalProperties and the permissions object (check,
// user, description). Nothing else of the schema is kept: the fake must not
// carry 4 MB of descriptions. Output: schema/facts-pve<major>.json.
//
// Run by `go generate ./pvefake` (make generate-pvefake-schema); the
// package's test fails when the committed facts differ from a fresh run.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/egress-proxies/egress-proxies-operator/providers/proxmox/pvefake/internal/facts"
)

// Endpoints are the calls pvefake serves, "METHOD /path/{template}", as
// the API viewer names them.
var Endpoints = []string{
	"GET /version",
	"GET /cluster/nextid",
	"GET /cluster/resources",
	"GET /cluster/status",
	"GET /nodes/{node}/status",
	"GET /nodes/{node}/qemu",
	"DELETE /nodes/{node}/qemu/{vmid}",
	"GET /nodes/{node}/qemu/{vmid}/config",
	"POST /nodes/{node}/qemu/{vmid}/config",
	"PUT /nodes/{node}/qemu/{vmid}/config",
	"GET /nodes/{node}/qemu/{vmid}/status/current",
	"POST /nodes/{node}/qemu/{vmid}/status/start",
	"POST /nodes/{node}/qemu/{vmid}/status/stop",
	"POST /nodes/{node}/qemu/{vmid}/status/shutdown",
	"POST /nodes/{node}/qemu/{vmid}/clone",
	"GET /nodes/{node}/qemu/{vmid}/agent/network-get-interfaces",
	"GET /nodes/{node}/storage",
	"GET /nodes/{node}/storage/{storage}/status",
	"GET /nodes/{node}/storage/{storage}/content",
	"POST /nodes/{node}/storage/{storage}/upload",
	"DELETE /nodes/{node}/storage/{storage}/content/{volume}",
	"GET /nodes/{node}/tasks",
	"GET /nodes/{node}/tasks/{upid}/status",
	"GET /nodes/{node}/tasks/{upid}/log",
}

// The output's types are package facts', shared with pvefake, which reads them.
type (
	Facts       = facts.Facts
	Endpoint    = facts.Endpoint
	Permissions = facts.Permissions
	Param       = facts.Param
)

func main() {
	dir := flag.String("dir", "schema", "the directory holding SOURCE and apidata-<version>.js.gz")
	flag.Parse()
	outs, err := GenerateAll(*dir)
	if err != nil {
		log.Fatal(err)
	}
	for name, b := range outs {
		if err := os.WriteFile(filepath.Join(*dir, name), b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// Source is one line of SOURCE: version commit sha256 repository.
type Source struct{ Version, Commit, SHA256, Repo string }

// ReadSources reads dir/SOURCE.
func ReadSources(dir string) ([]Source, error) {
	f, err := os.Open(filepath.Join(dir, "SOURCE"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []Source
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 4 {
			return nil, fmt.Errorf("SOURCE: %q: want version commit sha256 repository", line)
		}
		out = append(out, Source{fs[0], fs[1], fs[2], fs[3]})
	}
	return out, sc.Err()
}

// GenerateAll returns facts-pve<major>.json for every version in SOURCE.
func GenerateAll(dir string) (map[string][]byte, error) {
	srcs, err := ReadSources(dir)
	if err != nil {
		return nil, err
	}
	outs := map[string][]byte{}
	for _, src := range srcs {
		raw, err := readGz(filepath.Join(dir, "apidata-"+src.Version+".js.gz"))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(raw)
		if got := hex.EncodeToString(sum[:]); got != src.SHA256 {
			return nil, fmt.Errorf("apidata-%s.js.gz: sha256 of the content is %s, SOURCE says %s", src.Version, got, src.SHA256)
		}
		b, err := Generate(raw, src)
		if err != nil {
			return nil, fmt.Errorf("PVE %s: %w", src.Version, err)
		}
		name := "facts-pve" + strings.SplitN(src.Version, ".", 2)[0] + ".json"
		if _, dup := outs[name]; dup {
			return nil, fmt.Errorf("SOURCE pins two versions of one major release (%s)", name)
		}
		outs[name] = b
	}
	return outs, nil
}

func readGz(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return io.ReadAll(zr)
}

// node is the API viewer's tree.
type node struct {
	Path     string                     `json:"path"`
	Info     map[string]json.RawMessage `json:"info"`
	Children []node                     `json:"children"`
}

type method struct {
	Parameters struct {
		AdditionalProperties any                        `json:"additionalProperties"`
		Properties           map[string]json.RawMessage `json:"properties"`
	} `json:"parameters"`
	Permissions *struct {
		Check       json.RawMessage `json:"check"`
		User        string          `json:"user"`
		Description string          `json:"description"`
	} `json:"permissions"`
}

// Generate reads apidata.js ("const apiSchema = [...];") and returns the facts as JSON.
func Generate(apidata []byte, src Source) ([]byte, error) {
	start, end := bytes.IndexByte(apidata, '['), bytes.LastIndexByte(apidata, ']')
	if start < 0 || end < start {
		return nil, fmt.Errorf("apidata.js: no array")
	}
	var roots []node
	if err := json.Unmarshal(apidata[start:end+1], &roots); err != nil {
		return nil, fmt.Errorf("apidata.js: %w", err)
	}
	index := map[string]json.RawMessage{}
	var walk func(n node)
	walk = func(n node) {
		for m, info := range n.Info {
			index[m+" "+n.Path] = info
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	facts := Facts{Version: src.Version, Commit: src.Commit, SHA256: src.SHA256}
	formats := map[string]bool{}
	for _, key := range Endpoints {
		raw, ok := index[key]
		if !ok {
			return nil, fmt.Errorf("the schema has no %s", key)
		}
		var m method
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		verb, path, _ := strings.Cut(key, " ")
		ep := &Endpoint{Method: verb, Path: path, Parameters: map[string]*Param{}}
		if ap := m.Parameters.AdditionalProperties; ap != nil {
			b := truthy(ap)
			ep.AdditionalProperties = &b
		}
		for name, rawp := range m.Parameters.Properties {
			p, err := param(rawp, formats)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", key, name, err)
			}
			if strings.HasSuffix(name, "[n]") {
				// Kept as "ide[n]": "numa" and "numa[n]" are two keys.
				p.Indexed = true
				if mm := maxIndexRE.FindStringSubmatch(description(rawp)); mm != nil {
					n, _ := strconv.Atoi(mm[1])
					p.MaxIndex = &n
				}
			}
			ep.Parameters[name] = p
		}
		if m.Permissions != nil {
			ep.Permissions = &Permissions{Check: m.Permissions.Check, User: m.Permissions.User, Description: m.Permissions.Description}
		}
		facts.Endpoints = append(facts.Endpoints, ep)
	}
	for f := range formats {
		facts.Formats = append(facts.Formats, f)
	}
	sort.Strings(facts.Formats)
	b, err := json.MarshalIndent(facts, "", " ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

var maxIndexRE = regexp.MustCompile(`\(n is 0 to (\d+)\)`)

func description(raw json.RawMessage) string {
	var d struct {
		Description string `json:"description"`
	}
	_ = json.Unmarshal(raw, &d)
	return d.Description
}

// param keeps the facts of one parameter; formats collects named formats.
func param(raw json.RawMessage, formats map[string]bool) (*Param, error) {
	var in map[string]any
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, err
	}
	p := &Param{}
	if s, ok := in["type"].(string); ok {
		p.Type = s
	}
	switch f := in["format"].(type) {
	case string:
		p.Format = f
		name := strings.TrimSuffix(strings.TrimSuffix(f, "-list"), "-opt")
		formats[name] = true
	case map[string]any:
		p.Properties = map[string]*Param{}
		for k, v := range f {
			b, _ := json.Marshal(v)
			sub, err := param(b, formats)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			p.Properties[k] = sub
		}
	}
	if e, ok := in["enum"].([]any); ok {
		for _, v := range e {
			p.Enum = append(p.Enum, fmt.Sprint(v))
		}
	}
	p.Minimum, p.Maximum = number(in["minimum"]), number(in["maximum"])
	if s, ok := in["pattern"].(string); ok {
		p.Pattern = s
	}
	if n := number(in["maxLength"]); n != nil {
		i := int(*n)
		p.MaxLength = &i
	}
	if n := number(in["minLength"]); n != nil {
		i := int(*n)
		p.MinLength = &i
	}
	p.Optional = truthy(in["optional"])
	p.Default = in["default"]
	if s, ok := in["requires"].(string); ok {
		p.Requires = s
	}
	if s, ok := in["alias"].(string); ok {
		p.Alias = s
	}
	if s, ok := in["keyAlias"].(string); ok {
		p.KeyAlias = s
	}
	p.DefaultKey = truthy(in["default_key"])
	return p, nil
}

// number reads a JSON number or a numeric string (the schema has both:
// clone's bwlimit minimum is "0").
func number(v any) *float64 {
	switch x := v.(type) {
	case float64:
		return &x
	case string:
		if f, err := strconv.ParseFloat(x, 64); err == nil {
			return &f
		}
	}
	return nil
}

// truthy is Perl's truth for the schema's 0/1 flags.
func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case float64:
		return x != 0
	case string:
		return x != "" && x != "0"
	}
	return false
}
