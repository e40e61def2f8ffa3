package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// fixedDocs answers OpenAPI with a fixed document or error.
type fixedDocs struct {
	doc []byte
	err error
}

func (d fixedDocs) OpenAPI(context.Context) ([]byte, error) { return d.doc, d.err }

// TestOpenAPIOutcomesToHTTP: the document is served as it is, as JSON,
// to a read token; a failure is 500 (503 for a deadline), not configured
// is 404, and without a token it is 401 like every admin path.
func TestOpenAPIOutcomesToHTTP(t *testing.T) {
	const readTok = "read-token-0123456789"
	doc := []byte(`{"openapi":"3.1.0","info":{"title":"levee","version":"1"}}` + "\n")
	for _, c := range []struct {
		name   string
		docs   APIDocs
		status int
		reason string
	}{
		{"served", fixedDocs{doc: doc}, 200, ""},
		{"failed", fixedDocs{err: errors.New("bad route")}, 500, "internal"},
		{"deadline", fixedDocs{err: fmt.Errorf("sources: %w", context.DeadlineExceeded)}, 503, "timeout"},
		{"not configured", nil, 404, "not_found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tokens atomic.Pointer[[]Token]
			tokens.Store(&[]Token{NewToken(readTok, ScopeRead)})
			h, err := NewHandler(Options{Gateway: fakeGateway{}, Gatherer: prometheus.NewRegistry(), Docs: c.docs,
				Tokens: func() []Token { return *tokens.Load() }})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			expect(t, call(t, srv, "GET", "/api/v1/openapi.json", ""), 401, "unauthorized")
			r := call(t, srv, "GET", "/api/v1/openapi.json", "", "Authorization", "Bearer "+readTok)
			expect(t, r, c.status, c.reason)
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if c.status == 200 && string(r.raw) != string(doc) {
				t.Errorf("body %q, want the document as it is", r.raw)
			}
			if c.docs != nil {
				expect(t, call(t, srv, "POST", "/api/v1/openapi.json", "", "Authorization", "Bearer "+readTok), 403, "insufficient_scope")
			}
		})
	}
}
