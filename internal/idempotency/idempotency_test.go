package idempotency

import (
	"net/http"
	"testing"
)

func TestRequest(t *testing.T) {
	for _, c := range []struct {
		method string
		h      http.Header
		want   bool
	}{
		{"GET", nil, true},
		{"PUT", nil, true},
		{"DELETE", nil, true},
		{"HEAD", nil, true},
		{"OPTIONS", nil, true},
		{"TRACE", nil, true},
		{"POST", nil, false},
		{"PATCH", nil, false},
		{"CONNECT", nil, false},
		{"get", nil, false}, // methods are case-sensitive (RFC 9110, section 9.1)
		{"", nil, false},
		{"POST", http.Header{"Idempotency-Key": {"k1"}}, true},
		{"POST", http.Header{"X-Idempotency-Key": {"k1"}}, true},
		{"POST", http.Header{"Idempotency-Key": {""}}, false},
		{"POST", http.Header{"Idempotency-Key": {" \t"}}, false},
		{"POST", http.Header{"Idempotency-Key": {}}, false},
		{"POST", http.Header{"Idempotency-Key": {"", "k2"}}, false}, // the first line, as Header.Get
		{"POST", http.Header{"Idempotency-Key": {""}, "X-Idempotency-Key": {"k"}}, true},
	} {
		if got := Request(c.method, c.h); got != c.want {
			t.Errorf("Request(%q, %v) = %v, want %v", c.method, c.h, got, c.want)
		}
	}
}

func TestKeyAllocs(t *testing.T) {
	h := http.Header{"Idempotency-Key": {"k1"}}
	if n := testing.AllocsPerRun(100, func() { _ = Request("POST", h) }); n != 0 {
		t.Errorf("Request allocates %v times", n)
	}
}
