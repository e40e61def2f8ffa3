package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/balance"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/upstream"
)

// refusingForwarder answers every attempt with its refusal.
type refusingForwarder struct {
	ref   *upstream.Refusal
	calls int
}

func (f *refusingForwarder) Forward(context.Context, *http.Request, upstream.Outbound) (*http.Response, error) {
	f.calls++
	return nil, f.ref
}

// TestForwarderRefusal: a route's own Forwarder (a data route's) that
// refuses a request has its refusal written as levee's: the reason's
// status and Retry-After, the parameter and detail in the JSON body, never
// retried; the client's fault is not the endpoint's failure, the source's
// is. A reason without a row in the table is a bug, answered 500.
func TestForwarderRefusal(t *testing.T) {
	for _, c := range []struct {
		ref        upstream.Refusal
		status     int
		reason     string
		retryAfter string
		failures   uint64
	}{
		{upstream.Refusal{Reason: "invalid_parameter", Param: "customer_id", Detail: "parameter \"customer_id\": not an integer: \"1\\u0000'; DROP\""},
			400, "invalid_parameter", "", 0},
		{upstream.Refusal{Reason: "data_source_unavailable", RetryAfter: 3 * time.Second, Failure: true},
			503, "data_source_unavailable", "3", 1},
		{upstream.Refusal{Reason: "statement_timeout", Failure: true}, 504, "statement_timeout", "", 1},
		{upstream.Refusal{Reason: "no_such_reason"}, 500, "internal", "", 0},
	} {
		ep := endpoint.New("source", 1)
		up := (&Upstream{Name: "source"}).WithBalance(&Balance{Endpoints: []*endpoint.Endpoint{ep}, Picker: balance.NewSmoothWeighted([]*endpoint.Endpoint{ep})})
		fw := &refusingForwarder{ref: &c.ref}
		pol := &RetryPolicy{Attempts: 3, OnConnectFailure: true, OnStatus: []int{503, 504}, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond}
		h := newTestHandler(t, []*Route{{Name: "data", PathPrefix: "/", Upstream: up, Forwarder: fw, Retry: pol}}, []*Upstream{up})
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/orders?customer_id=x", nil))
		var body map[string]string
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: body %q is not JSON: %v", c.ref.Reason, w.Body.Bytes(), err)
		}
		if w.Code != c.status || body["reason"] != c.reason || w.Header().Get("Retry-After") != c.retryAfter {
			t.Errorf("%s: %d %v Retry-After %q, want %d %s %q", c.ref.Reason, w.Code, body, w.Header().Get("Retry-After"), c.status, c.reason, c.retryAfter)
		}
		if c.status != 500 && (body["parameter"] != c.ref.Param || body["detail"] != c.ref.Detail) {
			t.Errorf("%s: parameter %q detail %q, want %q %q", c.ref.Reason, body["parameter"], body["detail"], c.ref.Param, c.ref.Detail)
		}
		if fw.calls != 1 {
			t.Errorf("%s: forwarded %d times, want 1 (a refusal is never retried)", c.ref.Reason, fw.calls)
		}
		if got := ep.Stats.Failures.Load(); got != c.failures {
			t.Errorf("%s: endpoint failures %d, want %d", c.ref.Reason, got, c.failures)
		}
	}
}
