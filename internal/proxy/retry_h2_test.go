package proxy

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"golang.org/x/net/http2"
)

// TestRefusedStreamRetry: an HTTP/2 upstream's REFUSED_STREAM (wrapped or
// not) is its own failure class, retried under refused_stream for any
// method whose body is intact, and not under reset_before_response alone.
func TestRefusedStreamRetry(t *testing.T) {
	refused := fmt.Errorf("attempt: %w", http2.StreamError{StreamID: 1, Code: http2.ErrCodeRefusedStream})
	if f := classifyFailure(context.Background(), refused); f != failRefused {
		t.Fatalf("REFUSED_STREAM classified %q", f)
	}
	if f := classifyFailure(context.Background(), http2.StreamError{StreamID: 1, Code: http2.ErrCodeInternal}); f != failReset {
		t.Fatalf("INTERNAL_ERROR classified %q", f)
	}
	post := httptest.NewRequest("POST", "/", nil)
	if !retryable(&RetryPolicy{Attempts: 2, OnRefusedStream: true}, post, failRefused, 0, nil) {
		t.Error("a refused POST is not retried under refused_stream")
	}
	if retryable(&RetryPolicy{Attempts: 2, OnResetBeforeResponse: true}, post, failRefused, 0, nil) {
		t.Error("a refused stream is retried without refused_stream")
	}
	if retryable(&RetryPolicy{Attempts: 2, OnRefusedStream: true}, post, failRefused, 0, &untouchedBody{read: true}) {
		t.Error("a refused POST whose body was read is retried")
	}
}
