package openapi

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/levee-gw/levee/internal/dataquery"
)

// Auth is how a route identifies its callers.
type Auth string

// The route auth modes (config's route `auth`).
const (
	AuthNone   Auth = ""
	AuthAPIKey Auth = "api_key"
	AuthHMAC   Auth = "hmac"
	AuthJWT    Auth = "jwt"
	AuthFwd    Auth = "forward"
)

// The media types of a data route's formats.
const (
	MediaJSON   = "application/json"
	MediaNDJSON = "application/x-ndjson"
	MediaCSV    = "text/csv"
)

// Document is what Render turns into an OpenAPI document.
type Document struct {
	// Title is info.title ("levee" when empty).
	Title string
	// Version is info.version; empty, it is a hash of the rendered paths
	// and components, so it changes exactly when the documented API does.
	Version string
	// Description is info.description.
	Description string
	// Routes in the configuration's order (which decides who keeps the
	// plain path key when two routes' prefixes and methods collide).
	Routes []Route
}

// Route is one route of the configuration.
type Route struct {
	// Name is the route's name: its tag and its first operation's
	// operationId (the others get Name.method).
	Name string
	// Host is match.host ("" any host; may be "*.example.com").
	Host string
	// PathPrefix is match.path_prefix ("/" matches every path), or with
	// PathKind set the path, template or regex of that kind.
	PathPrefix string
	// PathKind is "" for a prefix, else the match's kind: "path" (exact),
	// "path_template" or "path_regex". The document keys the path item by
	// the text as written (braces percent-encoded) and says which it is.
	PathKind string
	// Methods are match.methods, upper case; nil means every method but
	// CONNECT.
	Methods []string
	Auth    Auth
	// Upstream names the upstream of a proxied route ("" for data routes).
	Upstream string
	// Data describes a data route; nil for a proxied one.
	Data *Data
	// Refusals are levee's own answers this route may give, each written
	// as a response under its status.
	Refusals []Refusal
}

// Refusal is one reason levee may refuse a request with.
type Refusal struct {
	// Reason is the stable code in the body's "reason".
	Reason string
	// Status is the HTTP status it is answered with.
	Status int
	// Sentence is the body's "error".
	Sentence string
	// RetryAfter is true when the answer carries Retry-After.
	RetryAfter bool
}

// Data describes a data route.
type Data struct {
	// Source names the data source.
	Source string
	// Table is a table-mode route's table ("" in SQL mode).
	Table string
	// Params are a SQL-mode route's declared parameters, in file order
	// (MaxLen and MaxItems 0 for dataquery's defaults).
	Params []dataquery.Param
	// Filters are a table-mode route's filterable columns.
	Filters []Filter
	// MaxFilters is how many filters one column may take in a request
	// (dataquery.MaxFiltersPerColumn); 0 leaves the bound out.
	MaxFilters int
	// Page is set when JSON answers are paged.
	Page *Page
	// Formats are the media types answered (MediaJSON, ...), the first the
	// default.
	Formats []string
	// Columns are the answer's columns, in order, when ColumnsKnown.
	Columns      []Column
	ColumnsKnown bool
	// ColumnsNote says where the columns came from, or why they are
	// unknown (the source down).
	ColumnsNote string
	// MaxRows and MaxBytes cap every answer.
	MaxRows  int
	MaxBytes int64
	// Cached is true when answers are cached (Levee-Cache, Age).
	Cached bool
	// Single is true when the answer is the one row as a JSON object
	// (404 not_found when none): no page, no limit, no count.
	Single bool
	// Select are a table-mode route's columns a request may choose with
	// select= (nil in SQL mode); Orders the orders it may choose with
	// order=, canonical (nil: the order is fixed).
	Select []string
	Orders []string
}

// Filter is a table-mode column a request may filter on.
type Filter struct {
	Column string
	// Kind is the column's kind ("" when unknown): values are parsed as it.
	Kind string
	// Ops are the operators allowed (eq, neq, lt, lte, gt, gte, in, is,
	// like).
	Ops []string
}

// Page is a data route's keyset paging of JSON answers.
type Page struct {
	Keyset       []string
	Default, Max int
}

// Column is one column of a data route's answer.
type Column struct {
	Name string
	// Type is the database's own type name ("" unknown).
	Type string
	// Kind is one of the column kinds.
	Kind string
	// NotNull: the database's catalogue says the column holds no NULL
	// (datasource.Column.NotNull); its schema then leaves out "null".
	NotNull bool
}

// operationMethods are the methods an OpenAPI 3.1 path item can hold, in
// the order operations are written.
var operationMethods = []string{"GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE"}

// MaxRoutes bounds a Document, so a document is bounded whatever it is
// given (a configuration has far fewer routes).
const MaxRoutes = 10000

// Render returns d as an OpenAPI 3.1 document in JSON, ending in a
// newline. Its errors name the route whose description is malformed.
func Render(d Document) ([]byte, error) {
	if len(d.Routes) > MaxRoutes {
		return nil, fmt.Errorf("openapi: %d routes, more than %d", len(d.Routes), MaxRoutes)
	}
	r := renderer{schemes: map[string]bool{}, taken: map[string]string{}, shapes: map[string]string{}}
	paths := obj{}
	var tags []any
	for i := range d.Routes {
		rt := &d.Routes[i]
		if err := checkRoute(rt); err != nil {
			return nil, fmt.Errorf("openapi: route %q: %w", rt.Name, err)
		}
		r.route(&paths, rt)
		tags = append(tags, obj{{"name", rt.Name}, {"description", routeSummary(rt)}})
	}
	components := obj{{"schemas", r.schemas()}}
	if schemes := r.securitySchemes(); len(schemes) > 0 {
		components.set("securitySchemes", schemes)
	}
	version := d.Version
	if version == "" {
		sum := sha256.Sum256(writeJSON(writeJSON(nil, paths, 0), components, 0))
		version = hex.EncodeToString(sum[:6])
	}
	title := d.Title
	if title == "" {
		title = "levee"
	}
	info := obj{{"title", title}, {"version", version}}
	if d.Description != "" {
		info.set("description", d.Description)
	}
	doc := obj{{"openapi", "3.1.0"}, {"info", info}}
	if tags != nil {
		doc.set("tags", tags)
	}
	doc.set("paths", paths)
	doc.set("components", components)
	return append(writeJSON(nil, doc, 0), '\n'), nil
}

// checkRoute refuses a description Render could not write faithfully.
func checkRoute(rt *Route) error {
	switch {
	case rt.Name == "" || strings.ContainsAny(rt.Name, "#/{}") || !componentName(rt.Name):
		return errors.New("name must be 1 or more of A-Z a-z 0-9 . - _")
	case !strings.HasPrefix(rt.PathPrefix, "/") || strings.ContainsRune(rt.PathPrefix, '#'):
		return fmt.Errorf("path_prefix %q must start with / and hold no #", rt.PathPrefix)
	case rt.Methods != nil && len(rt.Methods) == 0:
		return errors.New("methods: empty (nil means any)")
	}
	for _, rf := range rt.Refusals {
		if rf.Status < 400 || rf.Status > 599 || rf.Reason == "" {
			return fmt.Errorf("refusal %q: status %d is not 4xx or 5xx, or the reason is empty", rf.Reason, rf.Status)
		}
	}
	if d := rt.Data; d != nil {
		if len(d.Formats) == 0 {
			return errors.New("data: no formats")
		}
		for _, f := range d.Formats {
			if i := strings.IndexByte(f, '/'); i <= 0 || i == len(f)-1 {
				return fmt.Errorf("data: format %q is not a media type", f)
			}
		}
		seen := map[string]bool{"limit": d.Page != nil, "cursor": d.Page != nil}
		for _, p := range d.Params {
			if p.Name == "" || seen[p.Name] {
				return fmt.Errorf("data: parameter %q: empty, declared twice or a paging key", p.Name)
			}
			seen[p.Name] = true
		}
		for _, f := range d.Filters {
			if f.Column == "" || seen[f.Column] || len(f.Ops) == 0 {
				return fmt.Errorf("data: filter %q: empty, twice, a paging key or without operators", f.Column)
			}
			seen[f.Column] = true
		}
	}
	return nil
}

// componentName reports whether s may be a components key
// (^[a-zA-Z0-9.\-_]+$).
func componentName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// renderer carries what the routes share: the component schemas and
// security schemes used, and which (path, method) pairs are taken.
type renderer struct {
	rows    []member // "<route>.row", "<route>.page" schemas in route order
	schemes map[string]bool
	taken   map[string]string // path key + " " + method → route
	shapes  map[string]string // a template key's shape (templateShape) → the key that has it
}

func (r *renderer) schemas() obj {
	s := obj{{"Refusal", refusalSchema()}}
	return append(s, r.rows...)
}

// The security schemes, by the name operations refer to them with.
const (
	schemeAPIKey = "api_key"
	schemeBearer = "api_key_bearer"
	schemeHMAC   = "hmac"
	schemeJWT    = "jwt"
)

func (r *renderer) securitySchemes() obj {
	var s obj
	if r.schemes[schemeAPIKey] {
		s.set(schemeAPIKey, obj{{"type", "apiKey"}, {"in", "header"}, {"name", "X-Api-Key"},
			{"description", "An app's API key in X-Api-Key (or, the same key, as Authorization: Bearer). Both may be sent only if they carry the same key."}})
		s.set(schemeBearer, obj{{"type", "http"}, {"scheme", "bearer"},
			{"description", "An app's API key as Authorization: Bearer KEY (or in X-Api-Key)."}})
	}
	if r.schemes[schemeHMAC] {
		s.set(schemeHMAC, obj{{"type", "http"}, {"scheme", "LEVEE-HMAC-SHA256"},
			{"description", "A request signature: `Authorization: LEVEE-HMAC-SHA256 keyId=<key id>, signature=<base64 HMAC-SHA256>` " +
				"over the canonical request (method, path, query, the Date header and the body's SHA-256), with exactly one `Date` header " +
				"(IMF-fixdate) within the allowed clock skew; a signature is accepted once (replays are refused). See docs/authentication.md."}})
	}
	if r.schemes[schemeJWT] {
		s.set(schemeJWT, obj{{"type", "http"}, {"scheme", "bearer"}, {"bearerFormat", "JWT"},
			{"description", "A JWT of one of the route's issuers (identity.jwt_issuers) as Authorization: Bearer TOKEN, naming an app granted the route. See docs/authentication.md."}})
	}
	return s
}

// route writes rt's operations into paths.
func (r *renderer) route(paths *obj, rt *Route) {
	methods := rt.Methods
	if methods == nil {
		methods = operationMethods
	}
	var ops, others []string
	for _, m := range operationMethods {
		if slices.Contains(methods, m) {
			ops = append(ops, m)
		}
	}
	for _, m := range methods {
		if !slices.Contains(operationMethods, m) {
			others = append(others, m)
		}
	}
	// Braces would read as a path template: they are written
	// percent-encoded, as a request's path carries them in the normal form
	// levee routes on (package urlpath keeps { and } escaped).
	key := strings.NewReplacer("{", "%7B", "}", "%7D").Replace(rt.PathPrefix)
	// A template is keyed in OpenAPI's form, /v1/products/{id}, its
	// captures path parameters; unless a template of the same shape (the
	// names aside, which OpenAPI counts as the same path) took the form
	// first: the later one keeps the escaped braces, without parameters.
	var captures []capture
	if rt.PathKind == "path_template" {
		if k, caps, ok := templateKey(rt.PathPrefix); ok {
			shape := templateShape(k)
			if prev, taken := r.shapes[shape]; !taken || prev == k {
				key, captures = k, caps
				r.shapes[shape] = k
			}
		}
	}
	for _, m := range ops {
		if _, clash := r.taken[key+" "+m]; clash {
			key += "#" + rt.Name
			break
		}
	}
	item, _ := paths.get(key).(obj)
	if item == nil {
		item = obj{{"x-levee-path-prefix", rt.PathKind == ""}}
		if rt.PathKind != "" {
			item.set("x-levee-match", rt.PathKind)
		}
		if key != rt.PathPrefix {
			item.set("x-levee-path", rt.PathPrefix)
		}
	}
	if len(ops) == 0 {
		// Methods OpenAPI 3.1 has no operation for (PROPFIND, CONNECT, ...).
		un, _ := item.get("x-levee-unlisted-methods").(obj)
		un.set(rt.Name, others)
		item.set("x-levee-unlisted-methods", un)
	}
	for i, m := range ops {
		id := rt.Name
		if i > 0 {
			id += "." + strings.ToLower(m)
		}
		r.taken[key+" "+m] = rt.Name
		item.set(strings.ToLower(m), r.operation(rt, id, m, others, captures))
	}
	paths.set(key, item)
}

// routeSummary is the route's one-line summary.
func routeSummary(rt *Route) string {
	if d := rt.Data; d != nil {
		if d.Table != "" {
			return "Data API: table " + d.Table + " of data source " + d.Source + " (route " + rt.Name + ")"
		}
		return "Data API: a SQL query on data source " + d.Source + " (route " + rt.Name + ")"
	}
	return "Proxied to upstream " + rt.Upstream + " (route " + rt.Name + ")"
}

func (r *renderer) operation(rt *Route, id, method string, others []string, captures []capture) obj {
	op := obj{{"operationId", id}, {"tags", []string{rt.Name}}, {"summary", routeSummary(rt)}}
	var desc strings.Builder
	switch {
	case rt.PathKind == "path":
		fmt.Fprintf(&desc, "Matches the path `%s` exactly", rt.PathPrefix)
	case rt.PathKind == "path_template":
		fmt.Fprintf(&desc, "Matches the path template `%s` (each {capture} one whole segment)", rt.PathPrefix)
	case rt.PathKind == "path_regex":
		fmt.Fprintf(&desc, "Matches the paths the whole of which match the RE2 pattern `%s`", rt.PathPrefix)
	case rt.PathPrefix == "/":
		desc.WriteString("Matches every path")
	default:
		fmt.Fprintf(&desc, "Matches the path prefix `%s`: this path and every path below it (levee routes by prefix; OpenAPI has no prefix paths)", rt.PathPrefix)
	}
	if rt.Host != "" {
		fmt.Fprintf(&desc, ", on host `%s`", rt.Host)
	}
	desc.WriteString(".")
	if rt.Methods == nil {
		desc.WriteString(" Any method but CONNECT.")
	} else if len(others) > 0 {
		fmt.Fprintf(&desc, " Also methods OpenAPI has no operation for: %s.", strings.Join(others, ", "))
	}
	switch rt.Auth {
	case AuthAPIKey:
		desc.WriteString(" Callers are apps with an API key granted this route.")
	case AuthHMAC:
		desc.WriteString(" Callers are apps signing each request (HMAC-SHA256) and granted this route.")
	case AuthJWT:
		desc.WriteString(" Callers present a JWT (Authorization: Bearer) naming an app granted this route.")
	case AuthFwd:
		desc.WriteString(" Each request is first checked by an authorization service with the caller's credentials.")
	}
	if d := rt.Data; d != nil {
		if d.Single {
			fmt.Fprintf(&desc, " Read-only; answers one row as a JSON object, at most %d bytes.", d.MaxBytes)
		} else {
			fmt.Fprintf(&desc, " Read-only; every answer is capped at %d rows and %d bytes (a capped answer says so: `truncated`, NDJSON's last line, `Levee-Truncated`).", d.MaxRows, d.MaxBytes)
		}
		if d.Cached {
			desc.WriteString(" Answers are cached (`Levee-Cache`, `Age`).")
		}
		if !d.ColumnsKnown {
			desc.WriteString(" The answer's columns are unknown for now: " + d.ColumnsNote + ".")
		}
	}
	op.set("description", desc.String())
	op.set("x-levee-route", rt.Name)
	if rt.Host != "" {
		op.set("x-levee-host", rt.Host)
	}
	if rt.Methods == nil {
		op.set("x-levee-methods", "any but CONNECT")
	} else {
		op.set("x-levee-methods", rt.Methods)
	}
	switch rt.Auth {
	case AuthAPIKey:
		r.schemes[schemeAPIKey] = true
		op.set("security", []any{obj{{schemeAPIKey, []string{}}}, obj{{schemeBearer, []string{}}}})
	case AuthHMAC:
		r.schemes[schemeHMAC] = true
		op.set("security", []any{obj{{schemeHMAC, []string{}}}})
	case AuthJWT:
		r.schemes[schemeJWT] = true
		op.set("security", []any{obj{{schemeJWT, []string{}}}})
	}
	responses := obj{}
	params := pathParams(captures, rt.Data)
	if d := rt.Data; d != nil && (method == http.MethodGet || method == http.MethodHead) {
		params = append(params, r.dataParams(d, captures)...)
		responses.set("200", r.dataOK(rt, method == http.MethodHead))
	} else if rt.Data == nil {
		responses.set("default", obj{{"description", "The upstream's answer, passed through (any status, headers and body)."}})
	}
	if len(params) > 0 {
		op.set("parameters", params)
	}
	for _, group := range groupRefusals(rt.Refusals) {
		responses.set(strconv.Itoa(group[0].Status), refusalResponse(group, rt.Data == nil))
	}
	if len(responses) == 0 {
		responses.set("default", obj{{"description", "No answer is described for this method."}})
	}
	op.set("responses", responses)
	return op
}

// groupRefusals groups refusals by status, statuses ascending, reasons in
// their given order within a status.
func groupRefusals(rs []Refusal) [][]Refusal {
	var statuses []int
	by := map[int][]Refusal{}
	for _, rf := range rs {
		if _, ok := by[rf.Status]; !ok {
			statuses = append(statuses, rf.Status)
		}
		by[rf.Status] = append(by[rf.Status], rf)
	}
	slices.Sort(statuses)
	out := make([][]Refusal, 0, len(statuses))
	for _, s := range statuses {
		out = append(out, by[s])
	}
	return out
}

func refusalSchema() obj {
	return obj{{"type", "object"}, {"description", "levee's own refusal; clients key on `reason`, which never changes meaning."},
		{"required", []string{"error", "reason"}},
		{"properties", obj{
			{"error", obj{{"type", "string"}, {"description", "What happened, for a person reading a log."}}},
			{"reason", obj{{"type", "string"}, {"description", "The stable snake_case code."}}},
			{"parameter", obj{{"type", "string"}, {"description", "The query parameter at fault (data routes' 400s)."}}},
			{"detail", obj{{"type", "string"}, {"description", "What exactly was wrong."}}},
		}}}
}

// refusalResponse is the response of one status's refusals.
func refusalResponse(group []Refusal, proxied bool) obj {
	var desc strings.Builder
	desc.WriteString("levee refuses the request")
	if proxied {
		desc.WriteString(" (the upstream may answer this status too, with its own body)")
	}
	desc.WriteString(":")
	reasons := make([]string, 0, len(group))
	var retry []string
	for _, rf := range group {
		reasons = append(reasons, rf.Reason)
		fmt.Fprintf(&desc, "\n- `%s`: %s", rf.Reason, rf.Sentence)
		if rf.RetryAfter {
			retry = append(retry, rf.Reason)
		}
	}
	resp := obj{{"description", desc.String()}}
	headers := obj{}
	if len(retry) > 0 {
		h := "Seconds to wait before retrying"
		if len(retry) < len(group) {
			h += " (with " + strings.Join(retry, ", ") + ")"
		}
		headers.set("Retry-After", obj{{"description", h + "."}, {"schema", obj{{"type", "integer"}, {"minimum", 0}}}})
	}
	for _, rf := range group {
		switch rf.Reason {
		case "unauthenticated":
			headers.set("WWW-Authenticate", obj{{"description", "The credentials this route wants."}, {"schema", obj{{"type", "string"}}}})
		case "rate_limited", "quota_exhausted":
			for _, name := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
				headers.set(name, obj{{"description", "The caller's limit that refused it (draft-ietf-httpapi-ratelimit-headers)."}, {"schema", obj{{"type", "integer"}}}})
			}
		}
	}
	if len(headers) > 0 {
		resp.set("headers", headers)
	}
	resp.set("content", obj{{"application/json", obj{{"schema", obj{
		{"$ref", "#/components/schemas/Refusal"},
		{"properties", obj{{"reason", obj{{"enum", reasons}}}}},
	}}}}})
	return resp
}
