package pvefake

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"
)

// Requirement is what one call needs: every privilege of Privs on Path,
// or with Any one of them. Path is concrete or holds the placeholders of
// the parameter values given to Requirements.
type Requirement struct {
	Path  string
	Privs []string
	Any   bool
}

func (r Requirement) String() string {
	sep := ", "
	if r.Any {
		sep = " | "
	}
	return r.Path + ": " + strings.Join(r.Privs, sep)
}

// Requirements lists what a call to method path (the schema's template)
// with params (names to values; a value may be a placeholder such as
// "<isoStorage>", path parameters included) needs on PVE version: the
// schema's permission check (of an "or", the first alternative whose
// require_param is sent) and the checks the handler's code makes for
// those parameters (codeChecks). For a clone the source's disks and NICs
// are not parameters: their storage and bridge are the placeholders
// "<templateStorage>" and "<templateBridge>".
func Requirements(version int, method, path string, params map[string]string) ([]Requirement, error) {
	sch := schemas[version]
	if sch == nil {
		return nil, fmt.Errorf("no pinned schema for PVE %d", version)
	}
	var ep *endpoint
	for _, e := range sch.endpoints {
		if e.Method == method && e.Path == path {
			ep = e
		}
	}
	if ep == nil {
		return nil, fmt.Errorf("PVE %d's schema has no %s %s the fake serves", version, method, path)
	}
	var out []Requirement
	if ep.Permissions != nil && len(ep.Permissions.Check) > 0 {
		var check []any
		if err := json.Unmarshal(ep.Permissions.Check, &check); err != nil {
			return nil, err
		}
		req, err := staticCheck(check, params)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
		out = append(out, req...)
	}
	vm := "/vms/" + params["vmid"]
	switch method + " " + path {
	case "POST /nodes/{node}/qemu/{vmid}/clone":
		sid := "<templateStorage>"
		if st, ok := params["storage"]; ok {
			sid = st
		}
		out = append(out, Requirement{Path: "/storage/" + sid, Privs: []string{"Datastore.AllocateSpace"}},
			Requirement{Path: "/sdn/zones/localnetwork/<templateBridge>", Privs: []string{"SDN.Use"}})
	case "PUT /nodes/{node}/qemu/{vmid}/config", "POST /nodes/{node}/qemu/{vmid}/config":
		// update_vm checks the keys it deletes as it checks those it sets
		// (check_vm_modify_config_perm on @delete): a deleted key counts
		// with no value.
		keys := map[string]string{}
		maps.Copy(keys, params)
		for _, k := range splitList(params["delete"]) {
			keys[k] = ""
		}
		for _, k := range sortedKeys(keys) {
			v := keys[k]
			switch {
			case k == "node" || k == "vmid" || k == "digest" || k == "delete":
			case ipconfigRE.MatchString(k) || configPrivOf[k] == "cloudinit":
				out = append(out, Requirement{Path: vm, Privs: []string{"VM.Config.Cloudinit", "VM.Config.Network"}, Any: true})
			case driveRE.MatchString(k):
				file, opts := splitDrive(v)
				priv := "VM.Config.Disk"
				if opts["media"] == "cdrom" {
					priv = "VM.Config.CDROM"
				}
				out = append(out, Requirement{Path: vm, Privs: []string{priv}})
				if sid, rel, ok := strings.Cut(file, ":"); ok && (strings.HasPrefix(rel, "iso/") || strings.HasPrefix(rel, "vztmpl/")) {
					out = append(out, Requirement{Path: "/storage/" + sid, Privs: []string{"Datastore.AllocateSpace", "Datastore.Audit"}, Any: true})
				}
			case netRE.MatchString(k):
				out = append(out, Requirement{Path: vm, Privs: []string{"VM.Config.Network"}})
				_, opts := splitDrive(v)
				if b := opts["bridge"]; b != "" {
					p := "/sdn/zones/localnetwork/" + b
					if tag := opts["tag"]; tag != "" {
						p += "/" + tag
					}
					out = append(out, Requirement{Path: p, Privs: []string{"SDN.Use"}})
				}
			case k == "tags":
				out = append(out, Requirement{Path: vm, Privs: []string{"VM.Config.Options"}})
			case configPrivOf[k] != "" && configPrivOf[k] != "cloudinit":
				out = append(out, Requirement{Path: vm, Privs: []string{configPrivOf[k]}})
			default:
				return nil, fmt.Errorf("config key %q: no static requirement modelled", k)
			}
		}
	case "DELETE /nodes/{node}/storage/{storage}/content/{volume}":
		out = append(out, Requirement{Path: "/storage/" + params["storage"], Privs: []string{"Datastore.Allocate"}})
	}
	return out, nil
}

// staticCheck is exec_api2_perm_check read without a token: what a
// check requires.
func staticCheck(check []any, params map[string]string) ([]Requirement, error) {
	if len(check) == 0 {
		return nil, fmt.Errorf("empty check")
	}
	switch check[0] {
	case "and":
		var out []Requirement
		for _, sub := range check[1:] {
			r, err := staticCheck(asList(sub), params)
			if err != nil {
				return nil, err
			}
			out = append(out, r...)
		}
		return out, nil
	case "or":
		for _, sub := range check[1:] {
			l := asList(sub)
			if rp := requireParam(l); rp != "" {
				if _, ok := params[rp]; !ok {
					continue
				}
			}
			return staticCheck(l, params)
		}
		return nil, fmt.Errorf("no alternative of %v applies", check)
	case "perm":
		tmpl, _ := check[1].(string)
		var privs []string
		for _, p := range asList(check[2]) {
			privs = append(privs, fmt.Sprint(p))
		}
		anyOf := false
		for i := 3; i+1 < len(check); i += 2 {
			if check[i] == "any" {
				anyOf = truthyAny(check[i+1])
			}
		}
		path := templateRE.ReplaceAllStringFunc(tmpl, func(m string) string { return params[strings.Trim(m, "{}")] })
		return []Requirement{{Path: path, Privs: privs, Any: anyOf}}, nil
	}
	return nil, fmt.Errorf("permission test %v not modelled", check[0])
}

func requireParam(check []any) string {
	for i := 3; i+1 < len(check); i += 2 {
		if check[i] == "require_param" {
			s, _ := check[i+1].(string)
			return s
		}
	}
	return ""
}

// Role folds requirements into one role granted on paths: the union of
// the privileges, where an "any" requirement already met by a privilege
// of the role adds nothing and otherwise adds its first; pathOf maps a
// requirement's path to the ACL path that grants it (e.g. every
// "/vms/<…>" to "/vms").
func Role(reqs []Requirement, pathOf func(string) string) (privs []string, paths []string) {
	set := map[string]bool{}
	at := map[string]bool{}
	for _, r := range reqs {
		if !r.Any {
			for _, p := range r.Privs {
				set[p] = true
			}
		}
		at[pathOf(r.Path)] = true
	}
	for _, r := range reqs {
		if !r.Any {
			continue
		}
		met := false
		for _, p := range r.Privs {
			met = met || set[p]
		}
		if !met {
			set[r.Privs[0]] = true
		}
	}
	privs = sortedKeys(set)
	paths = sortedKeys(at)
	sort.Strings(paths)
	return privs, paths
}
