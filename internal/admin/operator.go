package admin

import (
	"net/http"
	"strconv"
)

// Operator is what GET /api/v1/config and GET /api/v1/routes read: the
// serving configuration, for an operator asking what levee runs with.
// The gateway implements it.
type Operator interface {
	// EffectiveConfig returns the serving configuration as JSON in the
	// file's shape, every default applied and every secret redacted.
	EffectiveConfig() ([]byte, error)
	// Routes returns the serving routes in the configuration's order.
	Routes() []RouteView
}

// RouteView is one route as GET /api/v1/routes shows it.
type RouteView struct {
	Name  string    `json:"name"`
	Match MatchView `json:"match"`
	// Rewrite is the route's rewrite; absent when it has none.
	Rewrite *RewriteView `json:"rewrite,omitempty"`
	// Split is the route's split (kind "split"); absent when it has none.
	Split *SplitView `json:"split,omitempty"`
	// Mirror is the route's mirror; absent when it has none.
	Mirror *MirrorView `json:"mirror,omitempty"`
	// Kind is "upstream" (proxied), "split" (proxied to one of Split's
	// upstreams), "data" (answered from a data
	// source), or "redirect" or "respond" (answered by levee itself).
	Kind       string `json:"kind"`
	Upstream   string `json:"upstream,omitempty"`
	DataSource string `json:"data_source,omitempty"`
	// Auth is "none", "api_key" or "hmac".
	Auth string `json:"auth"`
	// GrantedApps counts the apps granted the route (auth api_key or
	// hmac; 0 otherwise). GrantedAppIDs lists the first MaxRouteAppIDs
	// of them in id order; GrantedAppIDsTruncated says there are more.
	GrantedApps            int             `json:"granted_apps"`
	GrantedAppIDs          []string        `json:"granted_app_ids"`
	GrantedAppIDsTruncated bool            `json:"granted_app_ids_truncated,omitempty"`
	Limits                 RouteLimitsView `json:"limits"`
}

// MaxRouteAppIDs bounds RouteView.GrantedAppIDs: a route may be granted
// to every one of thousands of apps, and GET /api/v1/apps pages them.
const MaxRouteAppIDs = 100

// MatchView is a route's match, as in the file (empty: any). PathPrefix
// is "" when another path kind (Path, PathTemplate, PathRegex) is set.
type MatchView struct {
	Host         string     `json:"host,omitempty"`
	Path         string     `json:"path,omitempty"`
	PathPrefix   string     `json:"path_prefix,omitempty"`
	PathTemplate string     `json:"path_template,omitempty"`
	PathRegex    string     `json:"path_regex,omitempty"`
	Methods      []string   `json:"methods,omitempty"`
	Headers      []CondView `json:"headers,omitempty"`
	Query        []CondView `json:"query,omitempty"`
	RawPath      bool       `json:"raw_path,omitempty"`
}

// CondView is one header or query condition: the name, the test (exact,
// prefix, regex, present or absent) and, for the first three, the value.
type CondView struct {
	Name  string `json:"name"`
	Test  string `json:"test"`
	Value string `json:"value,omitempty"`
}

// RewriteView is a route's rewrite, as in the file; nil: none.
type RewriteView struct {
	StripPrefix   string `json:"strip_prefix,omitempty"`
	ReplacePrefix string `json:"replace_prefix,omitempty"`
	// PathRegex and Substitution are rewrite.path_regex.
	PathRegex    string `json:"path_regex,omitempty"`
	Substitution string `json:"substitution,omitempty"`
	Host         string `json:"host,omitempty"`
}

// MirrorView is a route's mirror, as in the file with its defaults; nil:
// none. Timeout is a Go duration ("5s").
type MirrorView struct {
	Upstream    string  `json:"upstream"`
	Percent     float64 `json:"percent"`
	MaxInFlight int     `json:"max_in_flight"`
	Timeout     string  `json:"timeout"`
}

// RouteLimitsView sums up what bounds a route's requests: its own limits
// and those of the upstream or data source behind it.
type RouteLimitsView struct {
	// MaxBodyBytes is the request body cap (0: none; absent for data
	// routes, which read no body).
	MaxBodyBytes *int64 `json:"max_body_bytes,omitempty"`
	// Timeout is the whole request's deadline, "" for none.
	Timeout  string `json:"timeout,omitempty"`
	Priority string `json:"priority"`
	// AnonymousRate and AnonymousBurst are the per-client-address limit
	// of a route with auth none (0: none).
	AnonymousRate  float64 `json:"anonymous_rate,omitempty"`
	AnonymousBurst int     `json:"anonymous_burst,omitempty"`
	// RetryAttempts is the tries in all of the route's retry policy (its
	// own, else its upstream's; 1: no retries).
	RetryAttempts int `json:"retry_attempts,omitempty"`
	// Concurrency is the upstream's or data source's concurrency limit:
	// a number, "adaptive" or "none"; MaxQueue its queue.
	Concurrency string `json:"concurrency"`
	MaxQueue    int    `json:"max_queue,omitempty"`
	// MaxRows is a data route's row cap per answer.
	MaxRows int `json:"max_rows,omitempty"`
}

// ConcurrencyOf renders a concurrency limit for RouteLimitsView.
func ConcurrencyOf(limit int, adaptive bool) string {
	switch {
	case adaptive:
		return "adaptive"
	case limit <= 0:
		return "none"
	}
	return strconv.Itoa(limit)
}

// operatorRoutes registers GET /api/v1/config and GET /api/v1/routes (reads:
// scope read is enough) on mux.
func operatorRoutes(mux *adminMux, op Operator) {
	mux.HandleFunc("GET /api/v1/config", func(w http.ResponseWriter, r *http.Request) {
		doc, err := op.EffectiveConfig()
		if err != nil {
			writeError(w, http.StatusInternalServerError, "internal", "the effective configuration could not be rendered: "+err.Error())
			return
		}
		writeRaw(w, doc)
	})
	mux.HandleFunc("GET /api/v1/routes", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"routes": op.Routes()})
	})
	splitRoutes(mux, op)
}

// writeRaw answers 200 with doc, JSON made elsewhere.
func writeRaw(w http.ResponseWriter, doc []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(doc)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(doc)
}
