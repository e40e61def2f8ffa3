package admin

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// This file serves GET /api/v1/admin-openapi.json, the OpenAPI 3.1
// document of the admin API itself (GET /api/v1/openapi.json describes
// the data plane's routes). The document is built from what NewHandler
// registered (adminMux records every pattern), so a path that is served
// is documented: TestAdminDocCoversMux fails when a registered pattern
// has no entry in adminDocs, or an entry matches nothing registered.
// Scopes are not written by hand either: they follow from the method, as
// requireToken decides them.

// adminMux is the admin ServeMux, recording each pattern in order.
// The heavy reads (heavyPatterns, heavy.go) are registered behind its
// heavyGate.
type adminMux struct {
	*http.ServeMux
	patterns []string
	heavy    *heavyGate
}

func newAdminMux() *adminMux {
	return &adminMux{ServeMux: http.NewServeMux(), heavy: newHeavyGate(MaxHeavyReads)}
}

// Handle registers h for pattern and records the pattern.
func (m *adminMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	if heavyPatterns[pattern] {
		h = m.heavy.wrap(h)
	}
	m.ServeMux.Handle(pattern, h)
}

// HandleFunc registers f for pattern and records the pattern.
func (m *adminMux) HandleFunc(pattern string, f func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(f))
}

// opDoc describes one admin operation.
type opDoc struct {
	summary string
	// ok is the success status and what its body is.
	ok     int
	okBody string
	// errs are the statuses of the operation's own refusals besides 401
	// and 403, which every guarded operation may answer.
	errs []int
	// body is what a request body carries; "" for none.
	body string
	// text is the success's media type when not application/json.
	text string
	// open marks the paths served without a token (requireToken).
	open bool
}

// adminDocs documents every pattern NewHandler may register, by pattern.
var adminDocs = map[string]opDoc{
	"GET /healthz":         {summary: "Liveness: levee's process answers", ok: 200, okBody: `{"status":"ok"}`, open: true},
	"GET /readyz":          {summary: "Readiness: the data plane serves; notes list degraded conditions", ok: 200, okBody: `{"status":"ready","notes":[...]}`, errs: []int{503}, open: true},
	"GET /metrics":         {summary: "Prometheus metrics (text exposition format)", ok: 200, okBody: "the metrics", text: "text/plain"},
	"/debug/pprof/":        {summary: "Go runtime profiles (net/http/pprof index and named profiles below it)", ok: 200, okBody: "the index or profile", text: "text/html"},
	"/debug/pprof/cmdline": {summary: "The process's command line (pprof)", ok: 200, okBody: "the command line", text: "text/plain"},
	"/debug/pprof/profile": {summary: "A CPU profile (pprof; ?seconds=N)", ok: 200, okBody: "the profile", text: "application/octet-stream"},
	"/debug/pprof/symbol":  {summary: "Symbol lookup (pprof)", ok: 200, okBody: "the symbols", text: "text/plain"},
	"/debug/pprof/trace":   {summary: "An execution trace (pprof; ?seconds=N)", ok: 200, okBody: "the trace", text: "application/octet-stream"},
	"GET /api/v1/upstreams": {summary: "Every upstream with the first page of its endpoints (?limit= per upstream), their state and discovery", ok: 200,
		okBody: `{"upstreams":[UpstreamView with "endpoints","endpoints_total","endpoints_next"]}`, errs: []int{400}},
	"GET /api/v1/upstreams/{name}": {summary: "One upstream with a page of its endpoints (?limit=, ?after=)", ok: 200,
		okBody: `UpstreamView with "endpoints","endpoints_total","endpoints_next"`, errs: []int{400, 404}},
	"GET /api/v1/upstreams/{name}/endpoints": {summary: "A page of an upstream's endpoints in address order (?limit=, ?after=)", ok: 200,
		okBody: `{"upstream","endpoints":[EndpointView],"total","next"}`, errs: []int{400, 404}},
	"PUT /api/v1/upstreams/{name}/endpoints": {summary: "Push an upstream's endpoint list (discovery push)", ok: 200, okBody: "what was applied, held or quarantined",
		errs: []int{400, 404, 409, 413, 422, 503}, body: "a JSON array of instances"},
	"POST /api/v1/upstreams/{name}/confirm":       {summary: "Apply the update the delta guard holds for an upstream", ok: 200, okBody: "what was applied", errs: []int{404, 409, 503}},
	"POST /api/v1/reload":                         {summary: "Re-read the configuration file; on refusal the old one keeps serving (409 pinned: its content was rolled back as bad)", ok: 200, okBody: `{"result":"applied"}`, errs: []int{409, 422}},
	"GET /api/v1/rollbacks":                       {summary: "The automatic rollback: versions newest first, pins, recent starts, and whether the last good configuration serves instead of the file", ok: 200, okBody: `{"serving_good","why","versions":[...],"pins":[...],"starts":[...]}`},
	"DELETE /api/v1/rollbacks/pins/{version}":     {summary: "Unpin a version rolled back as bad, so that its content may be applied again", ok: 200, okBody: `{"unpinned":Pin}`, errs: []int{400, 404, 500}},
	"POST /api/v1/rollbacks/pins/{version}/unpin": {summary: "Unpin a version (as DELETE /api/v1/rollbacks/pins/{version})", ok: 200, okBody: `{"unpinned":Pin}`, errs: []int{400, 404, 500}},
	"GET /api/v1/config":                          {summary: "The effective configuration (defaults applied, secrets redacted) in the file's shape", ok: 200, okBody: "the configuration as JSON", errs: []int{500}},
	"GET /api/v1/routes":                          {summary: "Every route in order: match, kind, target, auth, granted apps, limits", ok: 200, okBody: `{"routes":[RouteView]}`},
	"PUT /api/v1/routes/{name}/split": {summary: "Change a route's split weights (until a reload changes the file's split, or a restart)", ok: 200, okBody: `{"route","split":SplitView}`,
		errs: []int{400, 404, 409, 413}, body: `{"split":[{"upstream","weight"}, ...]}, every side once`},
	"POST /api/v1/apps":                     {summary: "Create an app", ok: 201, okBody: "the app", errs: []int{400, 409, 413, 422, 503}, body: "the app (id, name, status, grants, limits, route_limits)"},
	"GET /api/v1/cluster":                   {summary: "Cluster mode: the live nodes (from etcd) and whether Redis and etcd answer", ok: 200, okBody: `{"nodes":[{"id","version","admin","since"}],"redis":{"up","error"},"etcd":{"up","error"}}`},
	"GET /api/v1/apps":                      {summary: "List apps, a page at a time (?limit=, ?after=)", ok: 200, okBody: `{"apps":[...],"next_after":"..."}`, errs: []int{400, 503}},
	"GET /api/v1/apps/{id}":                 {summary: "One app", ok: 200, okBody: "the app", errs: []int{404, 503}},
	"PATCH /api/v1/apps/{id}":               {summary: "Change an app's fields", ok: 200, okBody: "the app", errs: []int{400, 404, 409, 413, 422, 503}, body: "the fields to change"},
	"DELETE /api/v1/apps/{id}":              {summary: "Delete an app and its keys", ok: 204, errs: []int{404, 503}},
	"POST /api/v1/apps/{id}/keys":           {summary: "Create an API key; its plaintext is in this answer only", ok: 201, okBody: "the key with its plaintext", errs: []int{404, 409, 503}},
	"DELETE /api/v1/apps/{id}/keys/{keyid}": {summary: "Revoke an API key", ok: 200, okBody: "the revoked key", errs: []int{404, 503}},
	"POST /api/v1/apps/{id}/passwords": {summary: "Create a basic-auth password (generated, or the body's); a generated one is in this answer only", ok: 201,
		okBody: "the password's id and times, with a generated plaintext", errs: []int{400, 404, 409, 413, 422, 501, 503}, body: `{"password": "..."} (optional)`},
	"DELETE /api/v1/apps/{id}/passwords/{pwid}": {summary: "Revoke a basic-auth password", ok: 200, okBody: "the revoked password", errs: []int{404, 409, 501, 503}},
	"POST /api/v1/apps/{id}/certificates": {summary: "Map a client certificate to the app (auth: client_cert): exactly one of fingerprint_sha256, san_dns, san_uri", ok: 201,
		okBody: "the mapping: id, its canonical value, created", errs: []int{400, 404, 409, 413, 422, 501, 503}, body: `{"fingerprint_sha256": "..."} or {"san_dns": "..."} or {"san_uri": "spiffe://..."}`},
	"GET /api/v1/apps/{id}/certificates":             {summary: "The app's client-certificate mappings", ok: 200, okBody: `{"app","certificates":[{"id",<kind>,"created"}]}`, errs: []int{404, 503}},
	"DELETE /api/v1/apps/{id}/certificates/{certid}": {summary: "Delete a client-certificate mapping; it stops admitting at once", ok: 200, okBody: "the deleted mapping", errs: []int{404, 501, 503}},
	"GET /api/v1/openapi.json":                       {summary: "OpenAPI document of the data plane's routes", ok: 200, okBody: "the document", errs: []int{500, 503}},
	"GET /api/v1/profiles":                           {summary: "The CPU profiles and goroutine dumps levee captured by itself, newest first", ok: 200, okBody: `{"profiles":[...]}`, errs: []int{500}},
	"GET /api/v1/profiles/{name}":                    {summary: "One captured profile file, for go tool pprof", ok: 200, okBody: "the file", text: "application/octet-stream", errs: []int{404, 500}},
	"GET /api/v1/admin-openapi.json":                 {summary: "This document: OpenAPI of the admin API", ok: 200, okBody: "the document"},
	"POST /api/v1/data-apis": {summary: "Create a data API: version 1 of its definition, a draft that does not serve", ok: 201, okBody: "the data API with its versions",
		errs: []int{400, 409, 413, 422, 503}, body: "the route definition (name, match, auth, data, ...)"},
	"GET /api/v1/data-apis":        {summary: "List data APIs, a page at a time (?limit=, ?after=)", ok: 200, okBody: `{"data_apis":[...],"next":"..."}`, errs: []int{400, 503}},
	"GET /api/v1/data-apis/{name}": {summary: "One data API with its versions and state", ok: 200, okBody: "the data API", errs: []int{404, 503}},
	"POST /api/v1/data-apis/{name}/versions": {summary: "Add a version (the published one keeps serving until a publish)", ok: 201, okBody: "the data API",
		errs: []int{400, 404, 409, 413, 422, 503}, body: "the route definition"},
	"POST /api/v1/data-apis/{name}/publish": {summary: "Publish a version (default the latest): it serves when the call returns", ok: 200, okBody: "the data API",
		errs: []int{400, 404, 409, 413, 422, 503}, body: `{"version": N} (optional)`},
	"POST /api/v1/data-apis/{name}/rollback": {summary: "Publish an earlier version (default the one before the published)", ok: 200, okBody: "the data API",
		errs: []int{400, 404, 409, 413, 422, 503}, body: `{"version": N} (optional)`},
	"POST /api/v1/data-apis/{name}/offline": {summary: "Take a data API offline: nothing serves, the last published version is remembered", ok: 200, okBody: "the data API", errs: []int{404, 409, 503}},
	"DELETE /api/v1/data-apis/{name}":       {summary: "Delete a data API and its versions", ok: 204, errs: []int{404, 409, 503}},
	"GET /ui/":                              {summary: "The admin web UI's files (no data; the page asks for a token and sends it on each API call)", ok: 200, okBody: "the page, its script or its style sheet", text: "text/html", errs: []int{404}, open: true},
	"GET /api/v1/summary":                   {summary: "The overview's figures from the metrics: requests, 5xx, refusals by reason, in flight, endpoints by state, last reload; with ?route=NAME (repeatable, at most 100) also each such route's requests, 5xx and refusals by reason", ok: 200, okBody: "Summary", errs: []int{400, 500}},
	"GET /api/v1/reloads":                   {summary: "The recent configuration loads, newest first: time, result and a refused one's problems", ok: 200, okBody: `{"reloads":[ReloadView]}`},
	"GET /api/v1/token":                     {summary: "What the presented token may do (scope write, read, or none while reads are open), for the web UI's buttons", ok: 200, okBody: `{"scope":"write|read|none","tokens":true}`},
}

// undocumented is the summary of a registered pattern without an entry in
// adminDocs (TestAdminDocCoversMux fails on it).
const undocumented = "undocumented"

// adminDocument renders the OpenAPI 3.1 document of the patterns
// registered on mux (the catch-all "/" aside), in registration order.
func adminDocument(patterns []string) []byte {
	paths := map[string]map[string]any{}
	for _, p := range patterns {
		method, path, found := strings.Cut(p, " ")
		if !found {
			method, path = "", p
		}
		if path == "/" {
			continue
		}
		d, ok := adminDocs[p]
		if !ok {
			d = opDoc{summary: undocumented, ok: 200}
		}
		item := paths[path]
		if item == nil {
			item = map[string]any{}
			paths[path] = item
		}
		if method == "" {
			method = http.MethodGet // pprof answers any method; documented as the GET it is
		}
		item[strings.ToLower(method)] = operation(method, path, d)
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":   "levee admin API",
			"version": "v1",
			"description": "levee's control plane, on its own listener (admin.listen). With admin tokens configured, every path but /healthz, " +
				"/readyz and the web UI's files under /ui/ needs Authorization: Bearer TOKEN; a token of scope read may make GET and HEAD requests, anything else needs " +
				"scope write (x-levee-scope on each operation). Without configured tokens levee generates a write token into state_dir/admin-token; " +
				"reads then need none. Every request passes the browser checks first: a Host that is not an IP, localhost or a name of admin.hosts is " +
				"421 host_not_allowed; an Origin or Sec-Fetch-Site of another origin is 403 cross_origin; a write not sent as application/json (or " +
				"without a body) is 415 unsupported_media_type. Refusals are JSON {\"error\", \"reason\"} with a stable reason.",
		},
		"paths": paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{"adminToken": map[string]any{"type": "http", "scheme": "bearer"}},
			"schemas": map[string]any{"Error": map[string]any{
				"type": "object", "required": []string{"error", "reason"},
				"properties": map[string]any{"error": map[string]any{"type": "string"}, "reason": map[string]any{"type": "string"}},
			}},
		},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic("admin: cannot marshal the admin document: " + err.Error()) // maps, slices and strings only
	}
	return append(b, '\n')
}

// operation renders one operation of the admin document.
func operation(method, path string, d opDoc) map[string]any {
	scope := "read"
	if method != http.MethodGet && method != http.MethodHead {
		scope = "write"
	}
	id := strings.ToLower(method) + strings.NewReplacer("/", "_", "{", "", "}", "", ".", "_", "-", "_").Replace(path)
	okResp := map[string]any{"description": d.okBody}
	if d.okBody == "" {
		okResp["description"] = "done, no body"
	} else {
		media := d.text
		if media == "" {
			media = "application/json"
		}
		okResp["content"] = map[string]any{media: map[string]any{}}
	}
	responses := map[string]any{strconv.Itoa(d.ok): okResp}
	errs := slices.Clone(d.errs)
	if heavyPatterns[method+" "+path] && !slices.Contains(errs, http.StatusServiceUnavailable) {
		errs = append(errs, http.StatusServiceUnavailable) // admin_busy
	}
	if !d.open {
		errs = append(errs, http.StatusUnauthorized)
	}
	// The browser checks (browser.go) apply to every operation.
	errs = append(errs, http.StatusForbidden) // cross_origin; insufficient_scope for writes
	if !probePath(path) {
		errs = append(errs, http.StatusMisdirectedRequest)
	}
	if scope == "write" {
		errs = append(errs, http.StatusUnsupportedMediaType)
	}
	for _, code := range errs {
		responses[strconv.Itoa(code)] = map[string]any{
			"description": http.StatusText(code),
			"content":     map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}},
		}
	}
	op := map[string]any{"operationId": id, "summary": d.summary, "responses": responses}
	if d.open {
		op["security"] = []any{}
	} else {
		op["security"] = []any{map[string]any{"adminToken": []any{}}}
		op["x-levee-scope"] = scope
	}
	var params []any
	for rest := path; ; {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			break
		}
		params = append(params, map[string]any{"name": rest[i+1 : i+j], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		rest = rest[i+j:]
	}
	if params != nil {
		op["parameters"] = params
	}
	if d.body != "" {
		op["requestBody"] = map[string]any{"required": true, "description": d.body,
			"content": map[string]any{"application/json": map[string]any{}}}
	}
	return op
}

// adminDocRoute registers GET /api/v1/admin-openapi.json on mux. It
// returns the function that renders the document, once, from the
// patterns registered by then: NewHandler calls it after its last
// registration, before anything is served.
func adminDocRoute(mux *adminMux) (finish func()) {
	var doc []byte
	mux.HandleFunc("GET /api/v1/admin-openapi.json", func(w http.ResponseWriter, r *http.Request) {
		writeRaw(w, doc)
	})
	return func() { doc = adminDocument(mux.patterns) }
}
