package admin

import (
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestTokenScope: GET /api/v1/token names the presented token's scope
// (write, read), refuses an unknown token 401 like every guarded path,
// says "none" when reads are open and no token is presented, and "write"
// on an API without tokens.
func TestTokenScope(t *testing.T) {
	const w, r = "scope-write-token-0123456789", "scope-read-token-0123456789"
	toks := func() []Token { return []Token{NewToken(w, ScopeWrite), NewToken(r, ScopeRead)} }
	var open atomic.Bool // read by the handler's goroutine
	serve := func(tokens func() []Token) *httptest.Server {
		o := fullOptions(t, fixedOperator{config: []byte("{}\n")}, tokens)
		o.OpenReads = func() bool { return open.Load() }
		h, err := NewHandler(o)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv
	}
	srv := serve(toks)
	for _, c := range []struct {
		token, scope string
	}{{w, "write"}, {r, "read"}} {
		got := call(t, srv, "GET", "/api/v1/token", "", "Authorization", "Bearer "+c.token)
		expect(t, got, 200, "")
		if got.body["scope"] != c.scope || got.body["tokens"] != true {
			t.Errorf("token of scope %s: %s", c.scope, got.raw)
		}
	}
	expect(t, call(t, srv, "GET", "/api/v1/token", "", "Authorization", "Bearer nope"), 401, "unauthorized")
	expect(t, call(t, srv, "GET", "/api/v1/token", ""), 401, "unauthorized")
	open.Store(true)
	if got := call(t, srv, "GET", "/api/v1/token", ""); got.status != 200 || got.body["scope"] != "none" {
		t.Errorf("open reads, no token: %d %s, want scope none", got.status, got.raw)
	}
	if got := call(t, srv, "GET", "/api/v1/token", "", "Authorization", "Bearer "+w); got.body["scope"] != "write" {
		t.Errorf("open reads, the write token: %s, want scope write", got.raw)
	}
	open.Store(false)
	if got := call(t, serve(nil), "GET", "/api/v1/token", ""); got.status != 200 || got.body["scope"] != "write" || got.body["tokens"] != false {
		t.Errorf("no tokens: %d %s, want scope write, tokens false", got.status, got.raw)
	}
}
