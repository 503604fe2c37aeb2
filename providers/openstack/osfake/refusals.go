package osfake

import (
	"fmt"
	"net/http"
	"strings"
)

// CallFault is the refusal FailCall answers a request with.
type CallFault int

const (
	// QuotaFault is the answer to a create over the project's quota.
	QuotaFault CallFault = iota + 1
	// PolicyFault is the answer to a call the service's policy forbids:
	// the role lacks the one rule that call needs.
	PolicyFault
)

// FailCall answers the n-th request from now (1 is the next; counted as
// Calls counts), before the API sees it, with the refusal of the service
// the request goes to, in that service's own form:
//   - Nova: 403 {"forbidden": …}, "Quota exceeded for instances: …"
//     (nova.exception.OverQuota, which servers.py answers with 403) or
//     "Policy doesn't allow os_compute_api:… to be performed."
//     (nova.exception.PolicyNotAuthorized);
//   - Neutron: 409 OverQuota "Quota exceeded for resources: ['port']."
//     (neutron_lib.exceptions.OverQuota) or 403 PolicyNotAuthorized
//     "(rule:create_port) is disallowed by policy" (oslo_policy's
//     PolicyNotAuthorized, which neutron/policy.py raises), in Neutron's
//     {"NeutronError": …} body;
//   - Glance: 403 "You are not authorized to complete get_image action."
//     (glance/api/policy.py), webob's HTML page;
//   - Keystone: 403 {"error": …} "You are not authorized to perform the
//     requested action: identity:validate_token."
//     (keystone.exception.ForbiddenAction).
//
// Glance and Keystone have no quota a call of the provider can meet
// (Glance's is on an image upload, which the provider never makes), so
// QuotaFault on a request to them answers their policy refusal.
// FailCall replaces a CutCall not yet reached, as another CutCall does.
func (c *Cloud) FailCall(n int, f CallFault) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = cut{call: c.calls.Load() + int64(n), fault: f}
}

// refuse answers r with the refusal f of the service r goes to.
func refuse(w http.ResponseWriter, r *http.Request, f CallFault) {
	resource, verb := resourceOf(r)
	switch service := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 2)[0]; {
	case service == "compute" && f == QuotaFault:
		novaError(w, http.StatusForbidden, "Quota exceeded for instances: Requested 1, but already used 10 of 10 instances")
	case service == "compute":
		novaError(w, http.StatusForbidden, fmt.Sprintf("Policy doesn't allow os_compute_api:%s:%s to be performed.", resource, novaAction(r, verb)))
	case service == "network" && f == QuotaFault:
		neutronError(w, http.StatusConflict, "OverQuota", fmt.Sprintf("Quota exceeded for resources: ['%s'].", strings.TrimSuffix(resource, "s")))
	case service == "network":
		neutronError(w, http.StatusForbidden, "PolicyNotAuthorized", fmt.Sprintf("(rule:%s_%s) is disallowed by policy", verb, strings.TrimSuffix(resource, "s")))
	case service == "image":
		w.Header().Set("Content-Type", "text/html; charset=UTF-8")
		w.WriteHeader(http.StatusForbidden)
		_, _ = fmt.Fprintf(w, "<html>\n <head>\n  <title>403 Forbidden</title>\n </head>\n <body>\n  <h1>403 Forbidden</h1>\n  You are not authorized to complete %s_image action.<br /><br />\n\n\n\n </body>\n</html>", verb)
	default:
		writeJSON(w, http.StatusForbidden, map[string]any{"error": map[string]any{
			"code": http.StatusForbidden, "title": "Forbidden",
			"message": "You are not authorized to perform the requested action: identity:validate_token.",
		}})
	}
}

// resourceOf names the collection a request's path addresses and the
// policy verb its method is checked under (servers and create for POST
// /compute/r/v2.1/servers).
func resourceOf(r *http.Request) (resource, verb string) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	// service, region, version, collection, …
	resource = "servers"
	if len(parts) > 3 {
		resource = strings.ReplaceAll(parts[3], "-", "_")
	}
	verb = map[string]string{http.MethodPost: "create", http.MethodPut: "update", http.MethodDelete: "delete"}[r.Method]
	if verb == "" {
		verb = "get"
	}
	return resource, verb
}

// novaAction is the verb of Nova's policy rule for a request: its reads
// are show (one item), detail or index (a list), not get
// (nova/policies/servers.py).
func novaAction(r *http.Request, verb string) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case verb != "get":
		return verb
	case parts[len(parts)-1] == "detail":
		return "detail"
	case len(parts) > 4:
		return "show"
	}
	return "index"
}
