package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/levee-gw/levee/internal/apps"
	"github.com/levee-gw/levee/internal/dataapis"
	"github.com/levee-gw/levee/internal/profiles"
	"github.com/levee-gw/levee/internal/statedb"
	"github.com/prometheus/client_golang/prometheus"
)

// fixedOperator answers with a fixed config document (or error) and
// routes.
type fixedOperator struct {
	config []byte
	err    error
	routes []RouteView
}

func (o fixedOperator) EffectiveConfig() ([]byte, error) { return o.config, o.err }
func (o fixedOperator) Routes() []RouteView              { return o.routes }

// SetSplit makes fixedOperator a SplitSetter: it knows no route.
func (o fixedOperator) SetSplit(string, []SplitSideView) (*SplitView, error) { return nil, ErrNoRoute }

// noProfiles is a ProfileStore with no captures.
type noProfiles struct{}

func (noProfiles) List() ([]profiles.Capture, error) { return nil, nil }
func (noProfiles) Open(string) (*os.File, error)     { return nil, os.ErrNotExist }

// fullOptions sets every optional part of the admin API, so that every
// route is registered.
func fullOptions(t *testing.T, op Operator, tokens func() []Token) Options {
	t.Helper()
	store, err := apps.Open(context.Background(), apps.Options{Config: statedb.Config{Path: filepath.Join(t.TempDir(), "apps.db")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	dstore, err := dataapis.Open(context.Background(), dataapis.Options{Path: filepath.Join(t.TempDir(), "data-apis.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dstore.Close() })
	return Options{Gateway: fakeGateway{}, Gatherer: prometheus.NewRegistry(), Apps: store, DataAPIs: dstore,
		Docs: fixedDocs{doc: []byte("{}")}, Profiles: noProfiles{}, Operator: op, Tokens: tokens,
		Reloads: func() []ReloadView { return nil }, Rollbacks: &fakeRollbacks{pins: map[int]bool{}}, Cluster: func(context.Context) ClusterView { return ClusterView{} }}
}

// TestOperatorViews: /api/v1/config serves the gateway's document as it
// is and /api/v1/routes the routes, both to a read token and to no one
// without a token; a render failure is 500; without an Operator, 404.
func TestOperatorViews(t *testing.T) {
	const readTok = "read-token-0123456789"
	var tokens atomic.Pointer[[]Token]
	tokens.Store(&[]Token{NewToken(readTok, ScopeRead)})
	body := int64(1 << 20)
	op := fixedOperator{config: []byte(`{"listen":"127.0.0.1:8080"}` + "\n"), routes: []RouteView{{
		Name: "video", Match: MatchView{Host: "api.example.com", PathPrefix: "/video/", Methods: []string{"GET"}},
		Kind: "upstream", Upstream: "video", Auth: "api_key", GrantedApps: 1, GrantedAppIDs: []string{"acme"},
		Limits: RouteLimitsView{MaxBodyBytes: &body, Priority: "normal", Concurrency: ConcurrencyOf(64, false), MaxQueue: 128},
	}}}
	h, err := NewHandler(fullOptions(t, op, func() []Token { return *tokens.Load() }))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	auth := []string{"Authorization", "Bearer " + readTok}

	expect(t, call(t, srv, "GET", "/api/v1/config", ""), 401, "unauthorized")
	r := call(t, srv, "GET", "/api/v1/config", "", auth...)
	expect(t, r, 200, "")
	if r.raw != string(op.config) || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("config: %q (%s), want the document as it is", r.raw, r.header.Get("Content-Type"))
	}
	expect(t, call(t, srv, "POST", "/api/v1/config", "", auth...), 403, "insufficient_scope")

	expect(t, call(t, srv, "GET", "/api/v1/routes", ""), 401, "unauthorized")
	r = call(t, srv, "GET", "/api/v1/routes", "", auth...)
	expect(t, r, 200, "")
	var got struct{ Routes []map[string]any }
	if err := json.Unmarshal([]byte(r.raw), &got); err != nil || len(got.Routes) != 1 {
		t.Fatalf("routes: %v %s", err, r.raw)
	}
	rt := got.Routes[0]
	limits, _ := rt["limits"].(map[string]any)
	if rt["name"] != "video" || rt["kind"] != "upstream" || rt["upstream"] != "video" || rt["granted_apps"] != 1.0 ||
		limits["concurrency"] != "64" || limits["max_body_bytes"] != float64(1<<20) {
		t.Errorf("route: %s", r.raw)
	}

	failing, err := NewHandler(fullOptions(t, fixedOperator{err: errors.New("boom")}, nil))
	if err != nil {
		t.Fatal(err)
	}
	fsrv := httptest.NewServer(failing)
	defer fsrv.Close()
	expect(t, call(t, fsrv, "GET", "/api/v1/config", ""), 500, "internal")

	none, err := NewHandler(Options{Gateway: fakeGateway{}, Gatherer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	nsrv := httptest.NewServer(none)
	defer nsrv.Close()
	expect(t, call(t, nsrv, "GET", "/api/v1/config", ""), 404, "not_found")
	expect(t, call(t, nsrv, "GET", "/api/v1/routes", ""), 404, "not_found")
}

// TestAdminDocCoversMux: the admin document lists every pattern the mux
// registered (read from the mux, not a hand list), each documented in
// adminDocs, and adminDocs documents nothing the mux does not serve; each
// pattern answers something other than the catch-all 404 (so what was
// recorded is what is served); and the document is well-formed OpenAPI
// 3.1 (operationIds unique, path parameters declared, scopes and
// security as requireToken decides them).
func TestAdminDocCoversMux(t *testing.T) {
	o := fullOptions(t, fixedOperator{config: []byte("{}\n")}, nil)
	mux, err := newMux(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	r := call(t, srv, "GET", "/api/v1/admin-openapi.json", "")
	expect(t, r, 200, "")
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Info    map[string]any                       `json:"info"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal([]byte(r.raw), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" || doc.Info["title"] == nil || doc.Info["version"] == nil {
		t.Errorf("openapi %q info %v", doc.OpenAPI, doc.Info)
	}
	registered := map[string]bool{}
	param := regexp.MustCompile(`\{[a-z_]+\}`)
	for _, p := range mux.patterns {
		registered[p] = true
		if p == "/" {
			continue
		}
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			method, path = "GET", p
		}
		op := doc.Paths[path][strings.ToLower(method)]
		if op == nil {
			t.Errorf("%s is served but not in the document", p)
			continue
		}
		if op["summary"] == undocumented {
			t.Errorf("%s has no entry in adminDocs (selfdoc.go)", p)
		}
		// Served: anything but the catch-all's "no admin endpoint".
		concrete := param.ReplaceAllString(path, "x")
		if method == "GET" && strings.HasPrefix(path, "/debug/pprof/") && path != "/debug/pprof/" {
			continue // profile and trace run for seconds; cmdline and symbol are plain text
		}
		if res := call(t, srv, method, concrete, ""); strings.Contains(res.raw, "no admin endpoint") {
			t.Errorf("%s %s reached the catch-all: %s", method, concrete, res.raw)
		}
	}
	for p := range adminDocs {
		if !registered[p] {
			t.Errorf("adminDocs documents %q, which the mux does not register", p)
		}
	}
	ids := map[string]string{}
	for path, item := range doc.Paths {
		for method, op := range item {
			where := method + " " + path
			id, _ := op["operationId"].(string)
			if id == "" || ids[id] != "" {
				t.Errorf("%s: operationId %q empty or also used by %s", where, id, ids[id])
			}
			ids[id] = where
			if resp, _ := op["responses"].(map[string]any); len(resp) == 0 {
				t.Errorf("%s: no responses", where)
			}
			var declared []string
			params, _ := op["parameters"].([]any)
			for _, p := range params {
				declared = append(declared, "{"+p.(map[string]any)["name"].(string)+"}")
			}
			if want := param.FindAllString(path, -1); strings.Join(want, ",") != strings.Join(declared, ",") {
				t.Errorf("%s: path parameters %v declared, want %v", where, declared, want)
			}
			sec, _ := op["security"].([]any)
			open := isOpenPath(path)
			if open != (len(sec) == 0) {
				t.Errorf("%s: security %v; only /healthz, /readyz and /ui/ are open", where, sec)
			}
			wantScope := "write"
			if method == "get" || method == "head" {
				wantScope = "read"
			}
			if !open && op["x-levee-scope"] != wantScope {
				t.Errorf("%s: x-levee-scope %v, want %s", where, op["x-levee-scope"], wantScope)
			}
		}
	}
	for _, must := range []string{"GET /api/v1/config", "GET /api/v1/routes", "GET /api/v1/admin-openapi.json", "GET /api/v1/openapi.json"} {
		if !registered[must] {
			t.Errorf("%s not registered with every option set", must)
		}
	}
}
