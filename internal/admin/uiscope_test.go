package admin

import (
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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

// TestSummaryRoutes: ?route= adds each named route's own totals (its
// requests, 5xx and refusals by reason, most first), zero for a route
// with none; without it there are none; over maxSummaryRoutes is 400.
func TestSummaryRoutes(t *testing.T) {
	reg := prometheus.NewRegistry()
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "levee_requests_total", Help: "h"}, []string{"route", "upstream", "code"})
	refs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "levee_refusals_total", Help: "h"}, []string{"route", "reason"})
	reg.MustRegister(reqs, refs)
	reqs.WithLabelValues("orders", "", "200").Add(7)
	reqs.WithLabelValues("orders", "", "502").Add(2)
	reqs.WithLabelValues("orders", "", "504").Add(1)
	reqs.WithLabelValues("other", "", "502").Add(5)
	refs.WithLabelValues("orders", "query_failed").Add(2)
	refs.WithLabelValues("orders", "statement_timeout").Add(1)
	refs.WithLabelValues("other", "query_failed").Add(5)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	s := summarize(mfs, "orders", "quiet")
	o, q := s.Routes["orders"], s.Routes["quiet"]
	if o == nil || o.Requests != 10 || o.Errors != 3 || len(o.Refusals) != 2 || o.Refusals[0] != (ReasonCount{"query_failed", 2}) || o.Refusals[1] != (ReasonCount{"statement_timeout", 1}) {
		t.Errorf("orders: %+v", o)
	}
	if q == nil || q.Requests != 0 || q.Refusals == nil || len(q.Refusals) != 0 || len(s.Routes) != 2 {
		t.Errorf("quiet: %+v, routes %v", q, s.Routes)
	}
	if s.Requests != 15 || len(s.Refusals) != 2 || s.Refusals[0] != (ReasonCount{"query_failed", 7}) {
		t.Errorf("the totals changed: %v %v", s.Requests, s.Refusals)
	}
	if summarize(mfs).Routes != nil {
		t.Error("routes without ?route=")
	}
	h, err := NewHandler(fullOptions(t, fixedOperator{config: []byte("{}\n")}, nil))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	expect(t, call(t, srv, "GET", "/api/v1/summary?route=a&route=b", ""), 200, "")
	expect(t, call(t, srv, "GET", "/api/v1/summary?"+strings.Repeat("route=x&", maxSummaryRoutes+1), ""), 400, "bad_request")
}
