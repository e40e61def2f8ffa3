package admin

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/levee-gw/levee/internal/apps"
	"github.com/levee-gw/levee/internal/statedb"
	"github.com/prometheus/client_golang/prometheus"
)

// fakeGateway is the smallest Gateway: ready, no upstreams.
type fakeGateway struct{}

func (fakeGateway) Ready() (bool, string)     { return true, "" }
func (fakeGateway) Upstreams() []UpstreamView { return nil }
func (fakeGateway) Notes() []string           { return nil }
func (fakeGateway) Reload() error             { return nil }
func (fakeGateway) PushEndpoints(context.Context, string, []byte) (PushResult, error) {
	return PushResult{}, nil
}
func (fakeGateway) ConfirmUpstream(context.Context, string) (ConfirmResult, error) {
	return ConfirmResult{}, nil
}

func (fakeGateway) Endpoints(string, string, int, func(EndpointView) bool) (EndpointsPage, bool) {
	return EndpointsPage{}, false
}

// server starts the admin handler on a real loopback listener with a real
// store in a temp dir; tokens are the accepted bearer tokens (nil: none).
func server(t *testing.T, tokens *atomic.Pointer[[]Token]) (*httptest.Server, *apps.Store) {
	t.Helper()
	store, err := apps.Open(context.Background(), apps.Options{Config: statedb.Config{Path: filepath.Join(t.TempDir(), "apps.db")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	o := Options{Gateway: fakeGateway{}, Gatherer: prometheus.NewRegistry(), Apps: store}
	if tokens != nil {
		o.Tokens = func() []Token { return *tokens.Load() }
	}
	h, err := NewHandler(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, store
}

type result struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func call(t *testing.T, srv *httptest.Server, method, path, body string, hdr ...string) result {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json") // as the CLI and the UI send it
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := result{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func expect(t *testing.T, r result, status int, reason string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	if reason != "" && r.body["reason"] != reason {
		t.Errorf("reason %v, want %s: %s", r.body["reason"], reason, r.raw)
	}
}

// TestAppsAPIStatuses drives every apps endpoint through each status it
// can answer.
func TestAppsAPIStatuses(t *testing.T) {
	srv, store := server(t, nil)

	r := call(t, srv, "POST", "/api/v1/apps", `{"id":"safety","grants":["video"],"limits":{"rate":100,"quota":{"requests":1000,"per":"24h"}}}`)
	expect(t, r, 201, "")
	if r.header.Get("Location") != "/api/v1/apps/safety" || r.body["name"] != "safety" || r.body["source"] != "api" {
		t.Errorf("create: %s %s", r.header.Get("Location"), r.raw)
	}
	if lim := r.body["limits"].(map[string]any); lim["burst"] != 100.0 || lim["quota"].(map[string]any)["per"] != "24h0m0s" {
		t.Errorf("limits %v", lim)
	}
	expect(t, call(t, srv, "POST", "/api/v1/apps", `{"id":"safety"}`), 409, "app_exists")
	expect(t, call(t, srv, "POST", "/api/v1/apps", `{"id":"x","grant":["video"]}`), 400, "bad_request")
	expect(t, call(t, srv, "POST", "/api/v1/apps", `{"id":"x"} {"id":"y"}`), 400, "bad_request")
	expect(t, call(t, srv, "POST", "/api/v1/apps", `{"id":`), 400, "bad_request")
	expect(t, call(t, srv, "POST", "/api/v1/apps", ``), 400, "bad_request")
	r = call(t, srv, "POST", "/api/v1/apps", `{"id":"x","limits":{"rate":"fast"}}`)
	expect(t, r, 400, "bad_request")
	if r.body["field"] != "limits.rate" {
		t.Errorf("type error field: %s", r.raw)
	}
	expect(t, call(t, srv, "POST", "/api/v1/apps", `{"id":"x","limits":{"quota":{"requests":1,"per":86400}}}`), 400, "bad_request")
	r = call(t, srv, "POST", "/api/v1/apps", `{"id":"Not Valid"}`)
	expect(t, r, 422, "invalid_app")
	if r.body["field"] != "id" {
		t.Errorf("422 field: %s", r.raw)
	}
	expect(t, call(t, srv, "POST", "/api/v1/apps", `{"id":"x","status":"paused"}`), 422, "invalid_app")
	expect(t, call(t, srv, "POST", "/api/v1/apps", `{"id":"x","name":"`+strings.Repeat("n", maxAppBodyBytes)+`"}`), 413, "body_too_large")

	expect(t, call(t, srv, "GET", "/api/v1/apps/safety", ""), 200, "")
	expect(t, call(t, srv, "GET", "/api/v1/apps/nope", ""), 404, "not_found")

	r = call(t, srv, "PATCH", "/api/v1/apps/safety", `{"status":"suspended","name":"Safety platform"}`)
	expect(t, r, 200, "")
	if r.body["status"] != "suspended" || r.body["name"] != "Safety platform" || len(r.body["grants"].([]any)) != 1 {
		t.Errorf("patch: %s", r.raw)
	}
	expect(t, call(t, srv, "PATCH", "/api/v1/apps/safety", `{}`), 400, "bad_request")
	expect(t, call(t, srv, "PATCH", "/api/v1/apps/safety", `{"id":"other"}`), 400, "bad_request")
	expect(t, call(t, srv, "PATCH", "/api/v1/apps/safety", `{"limits":{"burst":3}}`), 422, "invalid_app")
	expect(t, call(t, srv, "PATCH", "/api/v1/apps/nope", `{"name":"n"}`), 404, "not_found")

	r = call(t, srv, "POST", "/api/v1/apps/safety/keys", "")
	expect(t, r, 201, "")
	plain, _ := r.body["key"].(string)
	keyID, _ := r.body["id"].(string)
	if !strings.HasPrefix(plain, "lvk_") || keyID == "" || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("key: %s", r.raw)
	}
	if _, ok := r.body["sha256"]; ok {
		t.Error("the API shows the key hash")
	}
	if ref, ok := store.Current().LookupKey(sha256.Sum256([]byte(plain))); !ok || ref.KeyID != keyID {
		t.Errorf("snapshot does not hold the new key: %+v", ref)
	}
	r = call(t, srv, "GET", "/api/v1/apps/safety", "")
	if strings.Contains(r.raw, plain) || strings.Contains(r.raw, plain[4:]) {
		t.Error("GET shows the plaintext key")
	}
	expect(t, call(t, srv, "POST", "/api/v1/apps/nope/keys", ""), 404, "not_found")
	expect(t, call(t, srv, "DELETE", "/api/v1/apps/safety/keys/nope", ""), 404, "not_found")
	r = call(t, srv, "DELETE", "/api/v1/apps/safety/keys/"+keyID, "")
	expect(t, r, 200, "")
	if r.body["revoked"] == nil {
		t.Errorf("revoke: %s", r.raw)
	}
	expect(t, call(t, srv, "DELETE", "/api/v1/apps/safety/keys/"+keyID, ""), 409, "conflict")

	expect(t, call(t, srv, "GET", "/api/v1/apps?limit=0", ""), 400, "bad_request")
	expect(t, call(t, srv, "GET", "/api/v1/apps?limit=1001", ""), 400, "bad_request")
	call(t, srv, "POST", "/api/v1/apps", `{"id":"second"}`)
	r = call(t, srv, "GET", "/api/v1/apps?limit=1", "")
	expect(t, r, 200, "")
	if len(r.body["apps"].([]any)) != 1 || r.body["next"] != "safety" {
		t.Errorf("page 1: %s", r.raw)
	}
	r = call(t, srv, "GET", "/api/v1/apps?limit=1&after=safety", "")
	if len(r.body["apps"].([]any)) != 1 || r.body["next"] != nil {
		t.Errorf("page 2: %s", r.raw)
	}

	r = call(t, srv, "DELETE", "/api/v1/apps/safety", "")
	if r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.raw)
	}
	expect(t, call(t, srv, "DELETE", "/api/v1/apps/safety", ""), 404, "not_found")
	expect(t, call(t, srv, "PUT", "/api/v1/apps/second", `{}`), 404, "not_found")
}

// TestAdminToken: with a token, every path but /healthz and /readyz needs
// it; a wrong or missing one is 401 JSON; a reload that changes the token
// takes effect at once.
func TestAdminToken(t *testing.T) {
	var tokens atomic.Pointer[[]Token]
	tok := "first-token-0123456789"
	tokens.Store(&[]Token{NewToken(tok, ScopeWrite)})
	srv, _ := server(t, &tokens)
	for _, path := range []string{"/healthz", "/readyz"} {
		expect(t, call(t, srv, "GET", path, ""), 200, "")
	}
	for _, path := range []string{"/metrics", "/debug/pprof/", "/api/v1/apps", "/api/v1/upstreams", "/nowhere"} {
		for _, auth := range []string{"", "Bearer wrong", "Bearer " + tok + "x", "Basic " + tok, tok} {
			r := call(t, srv, "GET", path, "", "Authorization", auth)
			expect(t, r, 401, "unauthorized")
			if r.header.Get("WWW-Authenticate") == "" || r.header.Get("Content-Type") != "application/json" {
				t.Errorf("%s with %q: headers %v", path, auth, r.header)
			}
		}
	}
	expect(t, call(t, srv, "POST", "/api/v1/apps", `{"id":"a"}`), 401, "unauthorized")
	expect(t, call(t, srv, "POST", "/api/v1/apps", `{"id":"a"}`, "Authorization", "Bearer "+tok), 201, "")
	expect(t, call(t, srv, "GET", "/metrics", "", "Authorization", "Bearer "+tok), 200, "")
	expect(t, call(t, srv, "GET", "/nowhere", "", "Authorization", "Bearer "+tok), 404, "not_found")

	next := "second-token-0123456789"
	tokens.Store(&[]Token{NewToken(next, ScopeWrite)})
	expect(t, call(t, srv, "GET", "/api/v1/apps", "", "Authorization", "Bearer "+tok), 401, "unauthorized")
	expect(t, call(t, srv, "GET", "/api/v1/apps", "", "Authorization", "Bearer "+next), 200, "")
}

func TestAppsAPINotConfigured(t *testing.T) {
	h, err := NewHandler(Options{Gateway: fakeGateway{}, Gatherer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	expect(t, call(t, srv, "GET", "/api/v1/apps", ""), 404, "not_found")
}

// TestAdminTokenScopes: a read token may GET and HEAD every path (metrics
// and the apps included) and is refused 403 insufficient_scope, as JSON,
// on anything else; a write token may do everything; with both
// configured, each token keeps its own scope; /healthz and /readyz stay
// open.
func TestAdminTokenScopes(t *testing.T) {
	const readTok, writeTok = "read-token-0123456789", "write-token-0123456789"
	var tokens atomic.Pointer[[]Token]
	tokens.Store(&[]Token{NewToken(readTok, ScopeRead), NewToken(writeTok, ScopeWrite)})
	srv, _ := server(t, &tokens)
	read, write := "Bearer "+readTok, "Bearer "+writeTok

	for _, path := range []string{"/healthz", "/readyz"} {
		expect(t, call(t, srv, "GET", path, ""), 200, "")
	}
	expect(t, call(t, srv, "POST", "/api/v1/apps", `{"id":"a"}`, "Authorization", write), 201, "")
	for _, path := range []string{"/metrics", "/debug/pprof/", "/api/v1/apps", "/api/v1/apps/a", "/api/v1/upstreams"} {
		expect(t, call(t, srv, "GET", path, "", "Authorization", read), 200, "")
		expect(t, call(t, srv, "HEAD", path, "", "Authorization", read), 200, "")
	}
	writes := []struct{ method, path, body string }{
		{"POST", "/api/v1/apps", `{"id":"b"}`},
		{"PATCH", "/api/v1/apps/a", `{"status":"suspended"}`},
		{"POST", "/api/v1/apps/a/keys", ""},
		{"DELETE", "/api/v1/apps/a", ""},
		{"POST", "/api/v1/reload", ""},
		{"PUT", "/api/v1/upstreams/u/endpoints", "[]"},
		{"POST", "/api/v1/upstreams/u/confirm", ""},
		{"POST", "/nowhere", ""},
	}
	for _, wr := range writes {
		r := call(t, srv, wr.method, wr.path, wr.body, "Authorization", read)
		expect(t, r, 403, "insufficient_scope")
		if !strings.Contains(r.header.Get("WWW-Authenticate"), `error="insufficient_scope"`) || r.body["error"] == "" {
			t.Errorf("%s %s with a read token: headers %v body %v", wr.method, wr.path, r.header, r.body)
		}
		// The same request without a token is still 401, not 403: the
		// scope check never tells an anonymous caller anything.
		expect(t, call(t, srv, wr.method, wr.path, wr.body, "Authorization", "Bearer "+readTok+"x"), 401, "unauthorized")
	}
	// Nothing a read token tried took effect.
	r := call(t, srv, "GET", "/api/v1/apps/a", "", "Authorization", read)
	if r.status != 200 || r.body["status"] != "active" || len(r.body["keys"].([]any)) != 0 {
		t.Errorf("after the refused writes: %d %v", r.status, r.body)
	}
	expect(t, call(t, srv, "GET", "/api/v1/apps/b", "", "Authorization", read), 404, "not_found")
	expect(t, call(t, srv, "PATCH", "/api/v1/apps/a", `{"status":"suspended"}`, "Authorization", write), 200, "")
	expect(t, call(t, srv, "DELETE", "/api/v1/apps/a", "", "Authorization", write), 204, "")

	// A reload that drops the write token leaves only reads possible.
	tokens.Store(&[]Token{NewToken(readTok, ScopeRead)})
	expect(t, call(t, srv, "POST", "/api/v1/apps", `{"id":"c"}`, "Authorization", write), 401, "unauthorized")
	expect(t, call(t, srv, "GET", "/metrics", "", "Authorization", read), 200, "")
}
