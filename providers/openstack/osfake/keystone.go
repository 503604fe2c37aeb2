package osfake

import (
	"encoding/json"
	"net/http"
	"time"
)

// token is an issued Keystone token.
type token struct {
	expires time.Time
}

// unauthorizedBody is keystonemiddleware's 401 in front of Nova and Glance
// (keystonemiddleware/auth_token AuthProtocol.process_request, written by
// jsonutils.dumps: spaced, in this order); Keystone's own 401 for a
// refused login has the same fields written by flask, compact and sorted
// (keystoneUnauthorized). Both seen on the real services (Zed).
const unauthorizedBody = `{"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}}`

var keystoneUnauthorized = map[string]any{"error": map[string]any{"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}}

func (c *Cloud) routeKeystone(mux *http.ServeMux) {
	mux.HandleFunc("GET /identity/{$}", c.identityVersions)
	mux.HandleFunc("GET /identity/v3/{$}", c.identityVersions)
	mux.HandleFunc("POST /identity/v3/auth/tokens", c.issueToken)
	mux.HandleFunc("DELETE /identity/v3/auth/tokens", c.revokeToken)
	mux.HandleFunc("HEAD /identity/v3/auth/tokens", c.checkToken)
}

// checkToken is HEAD /v3/auth/tokens (keystone/api/auth.py
// AuthTokenResource.head, "Validate and check token"): with the caller's
// valid X-Auth-Token, 200 when the X-Subject-Token is valid, 404 when it
// is not (TokenNotFound); an invalid X-Auth-Token is keystonemiddleware's
// 401. A HEAD answer has no body.
func (c *Cloud) checkToken(w http.ResponseWriter, r *http.Request) {
	if !c.authorized(w, r) {
		return
	}
	c.mu.Lock()
	t, ok := c.tokens[r.Header.Get("X-Subject-Token")]
	valid := ok && !c.reject && time.Now().Before(t.expires)
	c.mu.Unlock()
	if !valid {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// revokeToken is DELETE /v3/auth/tokens (keystone/api/auth.py
// AuthTokenResource.delete): the caller's valid X-Auth-Token revokes the
// X-Subject-Token (policy identity:revoke_token lets a user revoke its own
// tokens; the fake has one user), 204; an unknown subject is 404 (keystone/
// token/provider.py revoke_token validates it first; with Fernet tokens,
// Keystone's default, "Could not recognize Fernet token"). From then on the services answer the token with
// keystonemiddleware's 401. Real keystonemiddleware caches a validated
// token for [keystone_authtoken]token_cache_time (300 s by default), so a
// service may still take a revoked token that long; the fake does not.
func (c *Cloud) revokeToken(w http.ResponseWriter, r *http.Request) {
	if !c.authorized(w, r) {
		return
	}
	subject := r.Header.Get("X-Subject-Token")
	c.mu.Lock()
	_, ok := c.tokens[subject]
	delete(c.tokens, subject)
	c.mu.Unlock()
	if !ok {
		// A Fernet token Keystone cannot decrypt (the fake's tokens are
		// never Fernet: any unknown one is such).
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"code": 404, "title": "Not Found", "message": "Could not recognize Fernet token"}})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// identityVersions is the version document ChooseVersion reads when the
// auth_url has no version.
func (c *Cloud) identityVersions(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusMultipleChoices, map[string]any{"versions": map[string]any{"values": []any{map[string]any{
		"id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
		"links": []any{map[string]any{"rel": "self", "href": c.AuthURL() + "/"}},
	}}}})
}

// authRequest is the part of POST /v3/auth/tokens the fake reads.
type authRequest struct {
	Auth struct {
		Identity struct {
			Methods  []string `json:"methods"`
			Password struct {
				User struct {
					Name     string `json:"name"`
					Password string `json:"password"`
				} `json:"user"`
			} `json:"password"`
			AppCred struct {
				ID     string `json:"id"`
				Secret string `json:"secret"`
			} `json:"application_credential"`
		} `json:"identity"`
		Scope *struct {
			Project struct {
				Name string `json:"name"`
				ID   string `json:"id"`
			} `json:"project"`
		} `json:"scope"`
	} `json:"auth"`
}

func (c *Cloud) issueToken(w http.ResponseWriter, r *http.Request) {
	var req authRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"code": 400, "title": "Bad Request", "message": "Expecting to find auth in request body. The server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error."}})
		return
	}
	id := req.Auth.Identity
	o := c.opts
	var method string
	switch {
	case len(id.Methods) == 1 && id.Methods[0] == "password" && o.Password != "" &&
		id.Password.User.Name == o.Username && id.Password.User.Password == o.Password &&
		req.Auth.Scope != nil && (req.Auth.Scope.Project.Name == o.ProjectName || req.Auth.Scope.Project.ID == c.projectID):
		method = "password"
	case len(id.Methods) == 1 && id.Methods[0] == "application_credential" && o.AppCredentialSecret != "" &&
		id.AppCred.ID == o.AppCredentialID && id.AppCred.Secret == o.AppCredentialSecret:
		method = "application_credential"
	}
	c.mu.Lock()
	rejected := c.reject
	c.mu.Unlock()
	if method == "" || rejected {
		w.Header().Set("Content-Type", "application/json")
		// Keystone names its own v3 endpoint.
		w.Header().Set("WWW-Authenticate", `Keystone uri="`+c.AuthURL()+`"`)
		writeJSON(w, http.StatusUnauthorized, keystoneUnauthorized)
		return
	}
	now := time.Now().UTC()
	tok := hexID() + hexID()
	c.mu.Lock()
	c.tokens[tok] = token{expires: now.Add(o.TokenTTL)}
	c.mu.Unlock()
	w.Header().Set("X-Subject-Token", tok)
	domain := map[string]any{"id": "default", "name": "Default"}
	writeJSON(w, http.StatusCreated, map[string]any{"token": map[string]any{
		"methods":    []string{method},
		"user":       map[string]any{"domain": domain, "id": c.userID, "name": o.Username, "password_expires_at": nil},
		"audit_ids":  []string{hexID()[:22]},
		"expires_at": now.Add(o.TokenTTL).Format("2006-01-02T15:04:05.000000Z"),
		"issued_at":  now.Format("2006-01-02T15:04:05.000000Z"),
		"project":    map[string]any{"domain": domain, "id": c.projectID, "name": o.ProjectName},
		"is_domain":  false,
		"roles":      []any{map[string]any{"id": hexID(), "name": "member"}, map[string]any{"id": hexID(), "name": "reader"}},
		"catalog":    c.catalog(),
	}})
}

// catalog lists compute and image endpoints, public and internal, per
// region.
func (c *Cloud) catalog() []any {
	service := func(typ, name, path string) map[string]any {
		var eps []any
		for _, region := range c.opts.Regions {
			for _, iface := range []string{"public", "internal"} {
				eps = append(eps, map[string]any{"id": hexID(), "interface": iface, "region": region, "region_id": region,
					"url": c.Server.URL + "/" + path + "/" + region + suffix(typ)})
			}
		}
		return map[string]any{"id": hexID(), "type": typ, "name": name, "endpoints": eps}
	}
	identity := map[string]any{"id": hexID(), "type": "identity", "name": "keystone", "endpoints": []any{
		map[string]any{"id": hexID(), "interface": "public", "region": c.opts.Regions[0], "region_id": c.opts.Regions[0], "url": c.Server.URL + "/identity"},
	}}
	return []any{identity, service("compute", "nova", "compute"), service("image", "glance", "image"), service("network", "neutron", "network")}
}

func suffix(typ string) string {
	if typ == "compute" {
		return "/v2.1"
	}
	return ""
}

// authorized checks the request's X-Auth-Token as keystonemiddleware does,
// answering 401 itself when it is not valid.
func (c *Cloud) authorized(w http.ResponseWriter, r *http.Request) bool {
	c.mu.Lock()
	t, ok := c.tokens[r.Header.Get("X-Auth-Token")]
	valid := ok && !c.reject && time.Now().Before(t.expires)
	c.mu.Unlock()
	if !valid {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("WWW-Authenticate", `Keystone uri="`+c.Server.URL+`/identity"`)
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(unauthorizedBody))
	}
	return valid
}
