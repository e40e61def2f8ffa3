package admin

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/levee-gw/levee/internal/dataapis"
	"github.com/prometheus/client_golang/prometheus"
)

// dataAPIServer serves the data-API lifecycle API over a real store in a
// temp dir (without the gateway's config checks: those are the gateway's
// tests'), behind tokens.
func dataAPIServer(t *testing.T, tokens *atomic.Pointer[[]Token]) *httptest.Server {
	t.Helper()
	store, err := dataapis.Open(context.Background(), dataapis.Options{Path: filepath.Join(t.TempDir(), "data-apis.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	h, err := NewHandler(Options{Gateway: fakeGateway{}, Gatherer: prometheus.NewRegistry(), DataAPIs: store,
		Tokens: func() []Token { return *tokens.Load() }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// TestDataAPIsAPIStatuses: each status and reason of the lifecycle API,
// and the token scopes (read may list and get, nothing else).
func TestDataAPIsAPIStatuses(t *testing.T) {
	const readTok, writeTok = "read-token-0123456789", "write-token-0123456789"
	var tokens atomic.Pointer[[]Token]
	tokens.Store(&[]Token{NewToken(readTok, ScopeRead), NewToken(writeTok, ScopeWrite)})
	srv := dataAPIServer(t, &tokens)
	w := []string{"Authorization", "Bearer " + writeTok}
	rd := []string{"Authorization", "Bearer " + readTok}
	def := `{"name": "orders", "match": {"path_prefix": "/o"}, "data": {"source": "s", "table": "t", "columns": ["id"]}}`

	r := call(t, srv, "POST", "/api/v1/data-apis", def, w...)
	expect(t, r, 201, "")
	if r.header.Get("Location") != "/api/v1/data-apis/orders" || r.body["state"] != "draft" {
		t.Fatalf("create: %s", r.raw)
	}
	expect(t, call(t, srv, "POST", "/api/v1/data-apis", def, rd...), 403, "insufficient_scope")
	expect(t, call(t, srv, "POST", "/api/v1/data-apis/orders/publish", "", rd...), 403, "insufficient_scope")
	expect(t, call(t, srv, "GET", "/api/v1/data-apis/orders", "", rd...), 200, "")
	expect(t, call(t, srv, "GET", "/api/v1/data-apis", ""), 401, "unauthorized")
	expect(t, call(t, srv, "POST", "/api/v1/data-apis", def, w...), 409, "data_api_exists")
	expect(t, call(t, srv, "POST", "/api/v1/data-apis", `{"name": 7}`, w...), 422, "invalid_data_api")
	r = call(t, srv, "POST", "/api/v1/data-apis", `{"name": "Bad Name", "data": {}}`, w...)
	expect(t, r, 422, "invalid_data_api")
	if r.body["field"] != "name" || r.body["problems"] == nil {
		t.Errorf("bad name: %s", r.raw)
	}
	expect(t, call(t, srv, "POST", "/api/v1/data-apis", `[1]`, w...), 400, "bad_request")
	expect(t, call(t, srv, "POST", "/api/v1/data-apis", `{"name": "x"} {}`, w...), 400, "bad_request")
	expect(t, call(t, srv, "POST", "/api/v1/data-apis", `{"name": "x", "pad": "`+strings.Repeat("a", 300<<10)+`"}`, w...), 413, "body_too_large")
	expect(t, call(t, srv, "POST", "/api/v1/data-apis/orders/publish", `{"version": 3}`, w...), 404, "not_found")
	expect(t, call(t, srv, "POST", "/api/v1/data-apis/orders/publish", `{"version": "1"}`, w...), 400, "bad_request")
	expect(t, call(t, srv, "POST", "/api/v1/data-apis/orders/publish", `{"versoin": 1}`, w...), 400, "bad_request")
	expect(t, call(t, srv, "POST", "/api/v1/data-apis/orders/offline", "", w...), 409, "conflict")
	expect(t, call(t, srv, "POST", "/api/v1/data-apis/orders/rollback", "", w...), 409, "conflict")
	r = call(t, srv, "POST", "/api/v1/data-apis/orders/publish", `{"version": 1}`, w...)
	expect(t, r, 200, "")
	if r.body["state"] != "published" || r.body["published_version"] != 1.0 {
		t.Fatalf("publish: %s", r.raw)
	}
	expect(t, call(t, srv, "POST", "/api/v1/data-apis/orders/versions", def, w...), 201, "")
	expect(t, call(t, srv, "POST", "/api/v1/data-apis/nope/versions", def, w...), 404, "not_found")
	expect(t, call(t, srv, "GET", "/api/v1/data-apis?limit=0", "", rd...), 400, "bad_request")
	r = call(t, srv, "GET", "/api/v1/data-apis?limit=1", "", rd...)
	if apis, _ := r.body["data_apis"].([]any); r.status != 200 || len(apis) != 1 {
		t.Fatalf("list: %s", r.raw)
	}
	expect(t, call(t, srv, "DELETE", "/api/v1/data-apis/orders", "", w...), 204, "")
	expect(t, call(t, srv, "GET", "/api/v1/data-apis/orders", "", w...), 404, "not_found")
}
