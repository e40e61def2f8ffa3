package proxy

import (
	"bytes"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/grpcwire"
)

// TestRetryGRPC: a trailers-only answer's gRPC status is retried when the
// policy names it, attempts remain and the body was kept whole; never for
// a transport failure, a status not named, or a body still streaming.
func TestRetryGRPC(t *testing.T) {
	pol := &RetryPolicy{Attempts: 3, OnGRPC: 1 << grpcwire.Unavailable}
	kept := &untouchedBody{keep: 1 << 10}
	kept.eof.Store(true)
	streaming := &untouchedBody{keep: 1 << 10}
	unavailable := result{status: 200, grpc: grpcwire.Unavailable, hasGRPC: true}
	for _, c := range []struct {
		name string
		pol  *RetryPolicy
		n    int
		res  result
		held *untouchedBody
		want bool
	}{
		{"named, kept", pol, 1, unavailable, kept, true},
		{"named, buffered body", pol, 2, unavailable, nil, true},
		{"no attempts left", pol, 3, unavailable, kept, false},
		{"no policy", nil, 1, unavailable, kept, false},
		{"not named", pol, 1, result{status: 200, grpc: grpcwire.NotFound, hasGRPC: true}, kept, false},
		{"no grpc-status", pol, 1, result{status: 200}, kept, false},
		{"transport failure", pol, 1, result{fail: failReset, grpc: grpcwire.Unavailable, hasGRPC: true}, kept, false},
		{"body still streaming", pol, 1, unavailable, streaming, false},
		{"code past the mask", pol, 1, result{status: 200, grpc: 40, hasGRPC: true}, kept, false},
	} {
		if got := retryGRPC(c.pol, c.n, c.res, c.held); got != c.want {
			t.Errorf("%s: %v", c.name, got)
		}
	}
}

// TestUntouchedBodyKeeps: a gRPC body is kept as it is read, up to keep
// bytes; past keep nothing is kept and it is not resendable.
func TestUntouchedBodyKeeps(t *testing.T) {
	b := &untouchedBody{rc: io.NopCloser(bytes.NewReader([]byte("hello world"))), keep: 64}
	if got, _ := io.ReadAll(b); string(got) != "hello world" || !b.resendable() || string(b.keptBody()) != "hello world" {
		t.Fatalf("read %q, kept %q, resendable %v", got, b.kept, b.resendable())
	}
	big := &untouchedBody{rc: io.NopCloser(bytes.NewReader(make([]byte, 100))), keep: 64}
	if _, _ = io.ReadAll(big); big.resendable() || big.kept != nil {
		t.Fatalf("a body past keep: resendable %v, %d kept", big.resendable(), len(big.kept))
	}
}

// TestRefuseGRPC: every refusal row answers a gRPC request trailers-only:
// 200, application/grpc, grpc-status from its HTTP status, levee's reason
// in grpc-message and Levee-Reason, no body.
func TestRefuseGRPC(t *testing.T) {
	for reason, rf := range refusals {
		rec := httptest.NewRecorder()
		status, n := refuseGRPC(rec, reason, "", 0)
		h := rec.Result().Header
		code, ok := grpcwire.StatusOf(h)
		if status != 200 || n != 0 || rec.Code != 200 || rec.Body.Len() != 0 || !ok || code != grpcwire.FromHTTPStatus(rf.status) ||
			h.Get("Content-Type") != "application/grpc" || h.Get("Levee-Reason") != string(reason) ||
			grpcwire.DecodeMessage(h.Get("Grpc-Message")) != "levee "+string(reason)+": "+rf.grpc.sentence {
			t.Errorf("%s: %d %v %q", reason, rec.Code, h, rec.Body.String())
		}
		if rf.retryAfter && h.Get("Retry-After") == "" {
			t.Errorf("%s: no Retry-After", reason)
		}
	}
	rec := httptest.NewRecorder()
	refuseGRPC(rec, ReasonUnauthenticated, "missing", 0)
	if got := grpcwire.DecodeMessage(rec.Header().Get("Grpc-Message")); got != "levee unauthenticated (missing): "+refusals[ReasonUnauthenticated].grpc.sentence {
		t.Errorf("with a detail: %q", got)
	}
	rec = httptest.NewRecorder()
	refuseGRPC(rec, ReasonQueueFull, "", 2500*time.Millisecond)
	if rec.Header().Get("Retry-After") != "3" || rec.Header().Get("Grpc-Status") != "14" {
		t.Errorf("queue_full: %v", rec.Header())
	}
}
